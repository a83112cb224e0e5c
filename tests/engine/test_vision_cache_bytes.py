"""The image-encoding cache bounded by bytes (--image-encoding-cache-bytes) as well as entries,
and counted in the memory budget: the model's KV store puts its bytes in the model's account
and trims it, after the prompt cache, when the budget is short (`kv_store.py`). On a stand-in
tower whose encodings are 4 MiB an image (`tests/support/wide_tower.py`)."""

from __future__ import annotations

import mlx.core as mx
from mlx_responses.service.engine.kv_store import KVStore
from mlx_responses.service.engine.memory.budget import MemoryBudget
from mlx_responses.service.engine.memory.kv_layout import KVLayout
from mlx_responses.service.engine.mlx_lm_compat import KVCache
from mlx_responses.service.engine.prompt_cache.cache import PromptCache
from mlx_responses.service.engine.requests import EngineStats
from mlx_responses.service.engine.vision.encoder import ImageEncoder

from tests.support.wide_tower import MIB, wide_image, wide_model

IMAGE = 4 * MIB  # one `wide_image`'s encoding
# 4 KiB of KV a token: 8 layers x (K, V) x 2 heads x 32 x float32.
LAYOUT = KVLayout(layers=8, kv_heads=2, head_dim=32, dtype_bytes=4)


def _encoded(encoder: ImageEncoder, *images: int) -> None:
    """`images` encoded one request after another (so the cache's order is theirs)."""
    model = wide_model()
    for k in images:
        assert encoder.encode(model, [wide_image(k)])[0] is not None


def test_the_cache_evicts_the_least_recently_used_by_bytes() -> None:
    encoder = ImageEncoder(entries=64, max_bytes=10 * MIB)
    _encoded(encoder, 0, 1, 0, 2)  # 0 hit again: 1 is the least recently used
    assert (encoder.stats.entries, encoder.stats.bytes) == (2, 2 * IMAGE)
    assert encoder.nbytes == 2 * IMAGE
    misses = encoder.stats.misses
    _encoded(encoder, 0, 2)
    assert encoder.stats.misses == misses  # both still held
    _encoded(encoder, 1)
    assert encoder.stats.misses == misses + 1  # evicted for 2
    # The entry bound still holds beside the bytes'.
    few = ImageEncoder(entries=1, max_bytes=10 * MIB)
    _encoded(few, 0, 1)
    assert (few.stats.entries, few.stats.bytes) == (1, IMAGE)


def test_an_encoding_larger_than_the_bound_is_not_kept_and_evicts_nothing() -> None:
    encoder = ImageEncoder(entries=64, max_bytes=3 * MIB)
    small = wide_image(7, side=8)  # 1 MiB
    model = wide_model()
    encoder.encode(model, [small])
    encoded = encoder.encode(model, [wide_image(0)])[0]  # 4 MiB: served, not kept
    assert encoded is not None and encoded.shape == (256, 4096)
    assert (encoder.stats.entries, encoder.stats.bytes) == (1, MIB)
    encoder.encode(model, [small])
    assert encoder.stats.hits == 1
    # 0 bytes disables the cache, as 0 entries does.
    off = ImageEncoder(entries=64, max_bytes=0)
    _encoded(off, 0, 0)
    assert (off.stats.misses, off.stats.entries, off.stats.bytes) == (2, 0, 0)


def _store(encoder: ImageEncoder) -> tuple[KVStore, MemoryBudget]:
    """A model's KV store under a 100 MiB budget: 20 MiB of runtime, 10 of weights; no prompt
    cache."""
    budget = MemoryBudget(100 * MIB, measure_runtime=lambda: 20 * MIB)
    account = budget.open("m", LAYOUT, context=65536, weights=10 * MIB)
    return KVStore(None, account, encoder), budget


def test_the_budget_counts_the_encodings_and_they_give_memory_back() -> None:
    encoder = ImageEncoder(entries=64, max_bytes=1 << 30)
    store, budget = _store(encoder)
    account = store.account
    assert account is not None
    _encoded(encoder, *range(10))
    store.settle(0)  # the engine settles after each admission
    assert account.image_cache == 10 * IMAGE
    assert account.held()["image_cache"] == 10 * IMAGE
    assert budget.used() == 20 * MIB + 10 * MIB + 10 * IMAGE
    # 40 MiB of KV (10,240 tokens) needs 10 MiB more than is free: the oldest encodings go.
    assert store.admit(1, 10_000, 240)
    assert account.image_cache == encoder.nbytes == 7 * IMAGE
    assert encoder.stats.bytes == 7 * IMAGE
    misses = encoder.stats.misses
    _encoded(encoder, 3)
    assert encoder.stats.misses == misses  # the most recent were kept
    # Encodings made past what the budget leaves are trimmed when the engine settles.
    _encoded(encoder, *range(10, 15))
    assert encoder.nbytes == 12 * IMAGE
    store.settle(0)
    assert encoder.nbytes == account.image_cache == 7 * IMAGE  # 30 MiB left beside the KV
    assert budget.used() <= 100 * MIB
    # A request that cannot fit even without them waits (the cache gave what it held).
    assert not store.admit(2, 10_000, 240)
    assert account.image_cache == encoder.nbytes == 0


def test_the_prompt_cache_gives_memory_back_before_the_encodings() -> None:
    """Trimming order: the prompt cache first (its entries save less work a byte), then the
    image encodings; an unloaded model's encodings go with its store."""
    encoder = ImageEncoder(entries=64, max_bytes=1 << 30)
    prompt = PromptCache("m", 8, 1 << 30, EngineStats())
    for first in (0, 5000):  # two entries of 4 MiB of KV (1,024 tokens)
        cache = KVCache()
        cache.update_and_fetch(mx.zeros((1, 2, 1024, 256)), mx.zeros((1, 2, 1024, 256)))
        prompt.keep("", list(range(first, first + 1024)), [cache])
    store, budget = _store(encoder)
    store.prompt = prompt
    account = store.account
    assert account is not None
    _encoded(encoder, *range(5))
    store.settle(0)
    assert (account.prompt_cache, account.image_cache) == (8 * MIB, 5 * IMAGE)
    # 48 MiB of KV: 6 MiB short, which the prompt cache gives (all it holds, by entries).
    assert store.admit(1, 12_000, 288)
    assert (account.prompt_cache, account.image_cache) == (0, 5 * IMAGE)
    # 60 MiB instead: 10 MiB short, and only the encodings are left to give it.
    store.release(1)
    assert store.admit(2, 15_000, 360)
    assert (account.prompt_cache, account.image_cache) == (0, 2 * IMAGE)
    assert budget.used() <= 100 * MIB
    store.close()
    assert (encoder.nbytes, encoder.stats.entries) == (0, 0)
