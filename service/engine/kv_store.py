"""One model's KV memory, owned in one place: live sequences, the prompt cache, the budget (and
a vision model's image-encoding cache, which the budget counts beside the prompt cache).

The worker asks this store, and nothing else, about KV memory:
- `check` (on the asyncio side, before a request is queued): a request whose prompt plus
  `max_output_tokens` could never fit the process's budget is refused (a 400 naming its size
  and the budget);
- `admit` / `release` (on the engine thread): a sequence starts only when its reservation fits
  beside the other models, the live sequences and the caches; when it does not, the prompt
  cache gives memory back first (its least recently used entries; with a disk tier they were
  written there when kept, so they are served from disk later), then the image-encoding cache
  (its encodings save more work a byte: a 1,000-token image's is ~7 MB on Qwen2.5-VL-7B, the
  KV of its tokens ~57 MB), and then the request waits;
- `fetch` / `keep` / `settle`: the prompt cache's entries and checkpoints (memory tier and disk
  tier, `prompt_cache/cache.py`), bounded by `--prompt-cache-max-bytes` less the live
  sequences' bytes (as the scheduler reports them) and by what the budget leaves beside the
  image encodings; those (`vision/encoder.py`, bounded by their own flags) by what it leaves
  beside the prompt cache.

Without a budget (`--memory-limit` unset on a CPU) admission is by count only, as before, and
the store still reports the model's memory by kind for the metrics.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any, Protocol, cast

import mlx.core as mx
from mlx import nn
from mlx.utils import tree_flatten
from mlx_responses.service.engine.memory.budget import MemoryBudget, MemoryLimitError, ModelAccount
from mlx_responses.service.engine.memory.kv_layout import (
    activations,
    cache_windows,
    kv_layout,
    model_sizes,
)
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.prompt_cache.cache import PromptCache
from mlx_responses.service.engine.prompt_cache.expiry import Lifetimes
from mlx_responses.service.engine.requests import EngineStats

log = logging.getLogger(__name__)


class ImageCache(Protocol):
    """A vision model's image-encoding cache (`vision/encoder.ImageEncoder`) as the budget
    sees it: its bytes, and a trim to fewer."""

    @property
    def nbytes(self) -> int: ...

    def trim(self, n_bytes: int) -> None: ...


class KVStore:
    """The KV memory of one model: its account in the budget, its prompt cache and its
    image-encoding cache (`images`; None: none)."""

    def __init__(
        self,
        prompt: PromptCache | None,
        account: ModelAccount | None,
        images: ImageCache | None = None,
    ) -> None:
        self.prompt = prompt
        self.account = account
        self.images = images

    # --- the asyncio side --------------------------------------------------------------------
    def check(self, prompt_tokens: int, max_tokens: int) -> None:
        """Raises MemoryLimitError for a request that could never fit the budget."""
        if self.account is not None:
            self.account.check(prompt_tokens, max_tokens)

    # --- the engine thread ---------------------------------------------------------------------
    def fetch(self, prompt: list[int], scope: str) -> tuple[list[Any] | None, list[int]]:
        """The cache of the longest cached prefix of `prompt` and the tokens still to prefill.
        A read that fails (memory or disk tier) is a miss, and the memory tier is rebuilt."""
        if self.prompt is None:
            return None, prompt
        try:
            return self.prompt.fetch(prompt, scope)
        except Exception:
            self._failed("read")
            return None, prompt

    def keep(
        self,
        scope: str,
        tokens: list[int],
        cache: list[Any],
        retention: Lifetimes | None = None,
        end: int = 0,
        *,
        kind: str = "assistant",
    ) -> None:
        """An entry (a checkpoint or a finished turn) into the prompt cache, kept as
        `retention` says, evicted as its `kind` (`PromptCache.keep`)."""
        if self.prompt is None:
            return
        try:
            self.prompt.keep(scope, tokens, cache, retention, end, kind=kind)
        except Exception:  # the request goes on; the entry is not kept
            self._failed("write")
            return
        self._counted()

    def rebuild(self) -> None:
        """The prompt cache's memory tier anew, empty (after a failure of the engine or of the
        cache itself: what it held may be half-written); the disk tier keeps its entries."""
        if self.prompt is not None:
            self.prompt.rebuild()
            self._counted()

    def _failed(self, what: str) -> None:
        log.exception("the prompt cache failed to %s an entry; its memory tier is rebuilt", what)
        if self.prompt is not None:
            self.prompt.stats.prompt_cache_failures += 1
        self.rebuild()

    def sync(self, live: Container[int], live_bytes: int) -> None:
        """Releases the reservations of sequences no longer in `live` (finished, cancelled or
        failed: whatever way they left the worker's active set), and takes the scheduler's
        report of the bytes its live sequences hold now."""
        if self.account is not None:
            for uid in [u for u in self.account.live if u not in live]:
                self.account.release(uid)
            with self.account.budget.lock:
                self.account.scheduler_bytes = live_bytes

    def admit(self, uid: int, prompt_tokens: int, max_tokens: int) -> bool:
        """Reserves a sequence's KV if it fits now (the prompt cache gives memory back first,
        then the image encodings); False: it must wait for memory."""
        account = self.account
        if account is None:
            return True
        tokens = account.reservation(prompt_tokens, max_tokens)
        short = account.shortfall(tokens)
        if short and self.prompt is not None:
            self.prompt.trim(self.prompt.memory.nbytes - short)
            self._counted()
            short = account.shortfall(tokens)
        if short and self.images is not None:
            self.images.trim(self.images.nbytes - short)
            self._counted()
            short = account.shortfall(tokens)
        if short:
            return False
        account.admit(uid, tokens)
        return True

    def release(self, uid: int) -> None:
        """A sequence ended (finished, cancelled or failed): its reservation goes."""
        if self.account is not None:
            self.account.release(uid)

    def settle(self, live_bytes: int) -> None:
        """Takes the scheduler's report of its live KV (`live_bytes`: a floor under the
        reservations) and trims the caches to what is left beside it: the prompt cache against
        --prompt-cache-max-bytes, then both to what the budget leaves (the prompt cache first,
        as in `admit`)."""
        if self.account is not None:
            with self.account.budget.lock:
                self.account.scheduler_bytes = live_bytes
        prompt, images = self.prompt, self.images
        if prompt is not None:
            prompt.trim(prompt.max_bytes - live_bytes)
        room = self.account.cache_room() if self.account is not None else None
        if room is not None:
            encoded = images.nbytes if images is not None else 0
            if prompt is not None and prompt.memory.nbytes > room - encoded:
                prompt.trim(room - encoded)
            kept = prompt.memory.nbytes if prompt is not None else 0
            if images is not None and images.nbytes > room - kept:
                images.trim(room - kept)
        self._counted()

    def _counted(self) -> None:
        """The caches' bytes into the stats and the account."""
        if self.prompt is not None:
            self.prompt.stats.prompt_cache_bytes = self.prompt.memory.nbytes
        if self.account is not None:
            with self.account.budget.lock:
                if self.prompt is not None:
                    self.account.prompt_cache = self.prompt.memory.nbytes
                if self.images is not None:
                    self.account.image_cache = self.images.nbytes

    def flush(self, timeout: float) -> None:
        if self.prompt is not None:
            self.prompt.flush(timeout)

    def close(self) -> None:
        """The model unloaded: the prompt cache, the image encodings and the account go."""
        if self.prompt is not None:
            self.prompt.close()
            self.prompt = None
        if self.images is not None:
            self.images.trim(0)
            self.images = None
        if self.account is not None:
            self.account.close()
            self.account = None


class StoreOwner(Protocol):
    """The worker's settings a model's KV store is made from (its flags)."""

    prompt_cache_max_entries: int  # 0: no prompt cache
    prompt_cache_max_bytes: int
    prompt_cache_dir: Path | None  # the disk tier's folder (None: none)
    prompt_cache_disk_bytes: int
    kv_bits: int | None
    prefill_step_size: int
    max_batch_size: int
    stats: EngineStats
    memory: MemoryBudget | None  # the process's budget

    @property
    def encoder(self) -> ImageCache: ...  # a vision model's image encodings (else empty)

    @property
    def clock(self) -> Callable[[], float]: ...  # the prompt-cache entries' lifetimes' clock


def open_store(
    owner: StoreOwner,
    loaded: LoadedModel,
    models: list[nn.Module],
    *,
    kv_group: int | None,
    prefill_rows: int,
    device: str,
    slots: bool,
    draft: Path | None = None,
    head: str | None = None,
) -> KVStore:
    """A loaded model's KV store (on its engine thread): its prompt cache (and disk tier), its
    image-encoding cache and its account in the process's budget (the weights of `models`:
    the model and its draft).
    `kv_group`: --kv-bits' group where the model's KV can be quantized (None: it is not);
    `prefill_rows`: prompts prefilled together; `device`: "gpu" or "cpu"; `slots`: the fixed
    slots schedule it (their rows grow in steps); `head`: the kind of drafting head whose
    caches its entries hold too (heads.py)."""
    o = owner
    kv_bits = o.kv_bits if kv_group is not None else None
    prompt = None
    if o.prompt_cache_max_entries > 0:
        prompt = PromptCache(
            loaded.alias, o.prompt_cache_max_entries, o.prompt_cache_max_bytes, o.stats, o.clock
        )
        if o.prompt_cache_dir is not None:
            identity = f"kv={kv_bits}/{kv_group}" + (f"/{head}" if head else "")
            folder, disk_bytes = o.prompt_cache_dir, o.prompt_cache_disk_bytes
            prompt.open_disk(folder, disk_bytes, loaded, identity, draft)
    budget = o.memory
    if budget is None:
        return KVStore(prompt, None, o.encoder)
    # The model's own arguments over its config: what mlx-lm read and derived from it.
    config = json.loads((loaded.path / "config.json").read_text()) | model_sizes(loaded.model)
    dtype = _activation_bytes(loaded.model)
    group = kv_group or 64
    companion = None
    if draft is not None and len(models) > 1:  # the draft's KV, beside the model's
        draft_config = json.loads((draft / "config.json").read_text())
        companion = kv_layout(
            draft_config, _activation_bytes(models[1]), kv_bits=kv_bits, group=group
        )
    layout = kv_layout(
        config,
        dtype,
        kv_bits=kv_bits,
        group=group,
        windows=cache_windows(make_prompt_cache(loaded.model)),
        chunk=o.prefill_step_size,
        draft=companion,
    )
    weights = sum(_nbytes(m) for m in models)
    account = budget.open(loaded.alias, layout, loaded.context_length, weights)
    account.slots, account.max_rows = slots, o.max_batch_size
    account.activations = activations(
        config, dtype, rows=prefill_rows, step=o.prefill_step_size, scores=device == "cpu"
    )
    try:
        account.check_room()
    except MemoryLimitError:
        account.close()
        if prompt is not None:
            prompt.close()
        raise
    return KVStore(prompt, account, o.encoder)


def _arrays(model: nn.Module) -> list[tuple[str, mx.array]]:
    return cast(list[tuple[str, mx.array]], tree_flatten(model.parameters()))


def _nbytes(model: nn.Module) -> int:
    return sum(int(v.nbytes) for _, v in _arrays(model))


def _activation_bytes(model: nn.Module) -> int:
    """Bytes of the model's activations' dtype: its norms' (quantized weights keep them in it),
    else its first floating-point array's."""
    arrays = _arrays(model)
    norms = [v for k, v in arrays if k.endswith("norm.weight")]
    floats = [v for _, v in arrays if mx.issubdtype(v.dtype, mx.floating)]
    for value in (*norms, *floats):
        return int(value.dtype.size)
    return 2
