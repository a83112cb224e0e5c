"""What the memory budget reserves for the copies a step makes (issue #51: peak RSS 1.19x the
limit on 32 prompts of 4k tokens): a kept entry is trimmed to the budget at once, a copy of a
live sequence's KV is made only where the budget has room beside the slots (or mlx-lm's batch)
that still hold it, the disk writer's borrowed entries count, and a long prompt grows the slots
once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine import speculation
from mlx_responses.service.engine.batch.scheduler import BatchScheduler
from mlx_responses.service.engine.kv_store import KVStore
from mlx_responses.service.engine.memory.budget import MemoryBudget
from mlx_responses.service.engine.memory.kv_layout import KVLayout
from mlx_responses.service.engine.mlx_lm_compat import KVCache
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.prompt_cache.cache import PromptCache
from mlx_responses.service.engine.prompt_cache.disk import PromptDisk
from mlx_responses.service.engine.requests import EngineStats
from mlx_responses.service.engine.scheduler import Admission
from mlx_responses.service.engine.slots import SlotScheduler

from tests.support.engine import admit, step_tokens

MIB = 1 << 20
# 4 KiB of KV a token: 8 layers x (K, V) x 2 heads x 32 x float32; an entry of 4,096 tokens
# holds 16 MiB.
LAYOUT = KVLayout(layers=8, kv_heads=2, head_dim=32, dtype_bytes=4)
TOKENS = 4096


def _entry(seed: int, tokens: int = TOKENS) -> tuple[list[int], list[Any]]:
    """A prompt-cache entry of `tokens` tokens in LAYOUT (4 KiB a token)."""
    cache = []
    for _ in range(LAYOUT.layers):
        layer = KVCache()
        keys = mx.full((1, LAYOUT.kv_heads, tokens, LAYOUT.head_dim), float(seed))
        layer.update_and_fetch(keys, keys)
        cache.append(layer)
    mx.eval([(c.keys, c.values) for c in cache])
    return [seed, *range(1, tokens)], cache


def _store(limit_mib: int = 100) -> tuple[KVStore, MemoryBudget]:
    """A KV store with a prompt cache under a budget: 20 MiB of runtime, 10 of weights."""
    budget = MemoryBudget(limit_mib * MIB, measure_runtime=lambda: 20 * MIB)
    account = budget.open("m", LAYOUT, context=65536, weights=10 * MIB)
    prompt = PromptCache("m", 64, 1 << 40, EngineStats())
    return KVStore(prompt, account), budget


def test_a_kept_entry_is_trimmed_to_the_budget_at_once() -> None:
    """70 MiB left for the caches: five 16 MiB entries kept one after another leave four, and
    the budget's sum never passes the limit. Before, the cache was trimmed only at the next
    admission: after a burst finished, all five (80 MiB) stayed."""
    store, budget = _store()
    assert store.prompt is not None
    for seed in range(5):
        store.keep("", *_entry(seed))
        assert budget.used() <= 100 * MIB
    assert store.prompt.memory.nbytes == 4 * 16 * MIB


def test_a_copy_of_live_kv_is_made_only_where_the_budget_has_room() -> None:
    store, budget = _store()
    assert store.prompt is not None and store.account is not None
    # 16 MiB live and 2 while a layer is copied: 52 MiB left for the caches.
    assert store.admit(1, TOKENS - 16, 16)
    for seed in range(3):
        store.keep("", *_entry(seed))
    assert store.prompt.memory.nbytes == 48 * MIB
    # The copy of sequence 1 (16 MiB) sits beside its slot: an older entry goes first.
    assert store.entry_room(TOKENS)
    assert store.prompt.memory.nbytes == 32 * MIB
    assert budget.used() + 16 * MIB <= 100 * MIB
    # Three live sequences of up to 5,120 tokens (3 x 20 MiB, and 7.5 while copied) leave
    # 2.5 MiB: no copy of 16 MiB, and the small entry kept there is not evicted for it.
    for uid in (2, 3):
        assert store.admit(uid, 5120 - 16, 16)
    store.keep("", *_entry(9, tokens=256))
    assert store.prompt.memory.nbytes == 1 * MIB
    assert not store.entry_room(TOKENS)
    assert store.prompt.memory.nbytes == 1 * MIB
    assert budget.used() <= 100 * MIB
    # No prompt cache: no copy at all.
    assert not KVStore(None, store.account).entry_room(16)


def test_the_disk_writers_entries_count_until_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry queued for the disk stays alive until written, whatever the memory tier
    keeps: the account counts it, and the memory tier gives way to it."""
    held = threading.Event()
    original = PromptDisk._write

    def stalled(self: PromptDisk, db: Any, job: Any) -> None:
        held.wait(30)
        original(self, db, job)

    monkeypatch.setattr(PromptDisk, "_write", stalled)
    store, budget = _store()
    prompt = store.prompt
    assert prompt is not None and store.account is not None
    prompt.disk = PromptDisk(tmp_path, 1 << 30, "ef" * 32)
    try:
        for seed in range(4):
            store.keep("", *_entry(seed))
        disk = prompt.disk.held_bytes()
        assert disk >= 4 * 16 * MIB  # four queued writes (MAX_PENDING is 6)
        # 70 MiB for the caches, 64 of them the writer's: one entry of memory tier at most.
        assert store.account.prompt_cache == prompt.memory.nbytes + disk
        assert prompt.memory.nbytes <= 70 * MIB - disk
        assert budget.used() <= 100 * MIB
        held.set()
        prompt.disk.flush()
        assert prompt.disk.held_bytes() == 0
    finally:
        held.set()
        prompt.close()


def test_a_long_prompt_grows_the_slots_once(random_model: Path) -> None:
    """A prompt of 600 tokens prefilled in chunks of 128 grows each layer's store once, to
    the whole prompt (each growth copies the store: one layer's old keys beside its new); a
    copy of its KV is made at its end only where `entry_room` says so."""
    model = load_model(random_model).model
    generator = SlotScheduler(
        model,
        stop_tokens=[],
        completion_batch_size=4,
        prefill_batch_size=4,
        prefill_step_size=128,
        sampler=lambda lp: mx.argmax(lp, axis=-1),
    )
    asked: list[int] = []
    generator.entry_room = lambda tokens: bool(asked.append(tokens))  # records; no room
    prompt = [(11 * j) % 900 + 3 for j in range(600)]
    (uid,) = admit(generator, [prompt], max_tokens=[3])
    capacities = set()
    finished: list[Any] = []
    while not finished:
        responses = step_tokens(generator)
        if generator._stores[0].keys is not None:
            capacities.add(generator._stores[0].keys.shape[2])
        finished = [r for r in responses if r.finish_reason is not None]
    assert capacities == {768}  # before: 256, 256, 512, 512, 768 (each growth a copy)
    # Asked once, at its end (600 prompt tokens and 3 generated): no room, no copy.
    assert asked == [603] and finished[0].prompt_cache is None
    assert finished[0].uid == uid


@pytest.mark.parametrize("speculate", [False, True], ids=["plain", "drafting"])
def test_a_finishing_batch_row_is_copied_only_where_the_budget_has_room(
    random_model: Path, speculate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mlx-lm's batch (`--engine batch`, the default on a GPU) copies a finishing row's KV
    out as its entry while the batch's cache still holds the row (until the step's filter):
    the copy is asked for as the slots' is, on the plain decode step and on a verify's (drafts
    forced at every step). Before, every finishing row was copied, room or not."""
    monkeypatch.setattr(
        speculation, "best_width", lambda found, rows: max((n for _, n in found), default=0)
    )
    model = load_model(random_model).model
    scheduler = BatchScheduler(
        model,
        stop_tokens=[],
        completion_batch_size=4,
        prefill_batch_size=4,
        prefill_step_size=128,
        speculate=speculate,
    )
    asked: list[int] = []
    scheduler.entry_room = lambda tokens: asked.append(tokens) or tokens < 100
    # Repeating prompts: the random model repeats their last token, which n-grams draft.
    prompts = [[5, 6, 7, 8] * 20, [9, 10, 11, 12] * 30]
    for uid, (prompt, tokens) in enumerate(zip(prompts, (3, 6), strict=True)):
        greedy = Admission(uid, [prompt], tokens, lambda lp: mx.argmax(lp, axis=-1), speculate=True)
        scheduler.admit(greedy)
    finished: dict[int, Any] = {}
    while len(finished) < 2:
        for token in step_tokens(scheduler):
            if token.finish_reason is not None:
                finished[token.uid] = token
    counts = scheduler.speculation
    scheduler.close()
    assert bool(counts and counts.verify_steps) == speculate
    # 80 + 3 tokens: room, an entry; 120 + 6: none, no copy.
    assert sorted(asked) == [83, 126]
    assert finished[0].prompt_cache is not None
    assert finished[1].prompt_cache is None
