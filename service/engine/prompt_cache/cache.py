"""One model's prompt cache: KV caches of earlier prompts, found by their longest token prefix.

Entries live in memory (mlx-lm's LRU prompt cache over an indexed trie, `trie.py`),
bounded by entries and bytes (the live sequences' bytes count against the same budget:
`trim`), and, with `--prompt-cache-dir`, on disk (`disk.py`), which outlives the
process. Keys are per model and, under `--isolate-keys`, per owner (`scope`), so no key learns
from a hit what another key has sent.

An entry is kept where a finished turn ends (its whole prompt and reply) and, for caches that
cannot be trimmed back (a sliding window that has rotated, a recurrent state), where a segment
of a prompt's prefill ended: its system turn's end, a client's cache breakpoints, or the prompt
but for its last token (the worker's `checkpoints`, `Scheduler.prompt_ends`).

An entry written under a client's lifetime (`ttl`: Anthropic `cache_control.ttl`, OpenAI
`prompt_cache_options` and `prompt_cache_retention`; service/text/retention.py) expires `ttl`
seconds after its last use, in memory (`expiry.py`) and on disk; an expired entry is
never served and is removed. An entry written without one is left to the LRU bounds.

A finished turn's entry serves only a prompt that extends it token for token. The next turn
rarely does: the template renders the reply in its own way (reasoning dropped, an end-of-turn
token where the model stopped), and an exact repeat (a retry, Codex's warm-up then its turn)
needs its last token fed again. A trimmable cache is cut back to where they part; these cannot
be, so without a checkpoint entry such a prompt is prefilled whole. mlx-lm's server keeps such
entries too (at its prompts' segment ends).

Owned by the MLX thread; the disk tier writes on a thread of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlx_responses.service.engine.mlx_lm_compat import can_trim_prompt_cache, trim_prompt_cache
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.prompt_cache.disk import PromptDisk, open_disk
from mlx_responses.service.engine.prompt_cache.expiry import ExpiringPromptCache, Lifetimes
from mlx_responses.service.engine.requests import EngineStats

# The entries' kinds, as mlx-lm's LRU evicts them: the least recently used of the kind that
# holds the most entries, "assistant" (finished turns) before "user" (checkpoints where prompts
# end, every N tokens, where the generation prompt begins) before "system" (the system turn's
# end, shared by every conversation under it), so many turns' entries do not push out the
# system turn's.
KINDS = ("assistant", "user", "system")


class PromptCache:
    """The memory tier and, when opened, the disk tier of one model's prompt cache."""

    def __init__(
        self,
        alias: str,
        max_entries: int,
        max_bytes: int,
        stats: EngineStats,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.alias = alias
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.stats = stats
        self.clock = clock  # the lifetimes' (wall time: the disk's outlive the process)
        self.memory = ExpiringPromptCache(max_entries, max_bytes, clock)
        self.disk: PromptDisk | None = None

    def open_disk(
        self, folder: Path, budget: int, loaded: LoadedModel, layout: str, draft: Path | None
    ) -> None:
        """Adds the disk tier: entries of this model, this KV `layout` and draft model."""
        self.disk = open_disk(
            folder, budget, loaded, layout, draft, clock=self.clock, health=self.stats.disk
        )

    def key(self, scope: str) -> str:
        """The model key for `scope`: one trie per model and owner."""
        return f"{self.alias}\x1f{scope}" if scope else self.alias

    def fetch(self, prompt: list[int], scope: str) -> tuple[list[Any] | None, list[int]]:
        """The KV cache of the longest cached prefix (the caller's to extend) and the tokens
        still to prefill (at least the last one: it produces the next logits)."""
        key = self.key(scope)
        cache, rest = self.memory.fetch_serving(key, prompt)
        if self.disk is not None:
            cache, rest = self.disk.fetch(key, prompt, cache, rest)
        if cache is not None and not _holds(cache, len(prompt) - len(rest)):
            cache, rest = None, prompt
        if cache is not None and not rest:
            # An exact hit still needs one token to produce the next logits.
            if not can_trim_prompt_cache(cache):
                return None, prompt
            trim_prompt_cache(cache, 1)
            rest = prompt[-1:]
        if cache is None:
            self.stats.prompt_cache_misses += 1
        else:
            self.stats.prompt_cache_hits += 1
            self.stats.cached_tokens += len(prompt) - len(rest)
        return cache, rest

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
        """Puts an entry holding `tokens` in memory and, with a disk tier, on disk; under a
        `retention`, it lives as an entry ending at prompt position `end` does (and stays off
        the disk if it says so). `kind` (`KINDS`): how the memory tier evicts it."""
        key = self.key(scope)
        ttl = retention.ttl(end) if retention is not None else None
        self.memory.insert_cache(key, tokens, cache, ttl, kind)
        if self.disk is not None and not (retention is not None and retention.memory_only):
            self.disk.put(key, tokens, cache, ttl)
        self.stats.prompt_cache_bytes = self.memory.nbytes

    def rebuild(self) -> None:
        """An empty memory tier in place of this one (the disk tier stays)."""
        self.memory = ExpiringPromptCache(self.max_entries, self.max_bytes, self.clock)
        self.stats.prompt_cache_bytes = 0

    def trim(self, n_bytes: int) -> None:
        """Evicts the least recently used entries until the memory tier holds `n_bytes` at
        most (with a disk tier, each was written there when kept), counting them."""
        before = len(self.memory)
        self.memory.trim_to(n_bytes=max(0, n_bytes))
        self.stats.prompt_cache_evictions += before - len(self.memory)
        self.stats.prompt_cache_bytes = self.memory.nbytes

    def flush(self, timeout: float) -> None:
        """Waits for the disk tier's queued writes (a graceful shutdown keeps the last turns)."""
        if self.disk is not None:
            self.disk.flush(timeout)

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()
            self.disk = None


def _holds(cache: list[Any], n: int) -> bool:
    """Whether every layer that counts its tokens holds the `n` an entry claims, and a chunked
    layer still the chunk its next token attends over. An entry cut back to a shorter prefix
    may not: mlx-lm's `ChunkedKVCache` (llama4's chunked layers) says it trims once its front is
    dropped, then trims fewer tokens than asked or leaves the chunk's start behind. Such an
    entry is not served."""
    for layer in cache:
        offset = getattr(layer, "offset", n)
        if isinstance(offset, int) and offset != n:
            return False
        chunk, start = getattr(layer, "chunk_size", None), getattr(layer, "start_position", 0)
        if isinstance(chunk, int) and chunk > 0 and start > n // chunk * chunk:
            return False
    return True
