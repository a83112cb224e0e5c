"""The memory tier's entries with an expiry (the clients' lifetimes: service/text/retention.py).

An entry written with a ttl expires `ttl` seconds after its last use (its insert, or a fetch
that served it); an expired entry is never served, and is removed before the next fetch. An
entry written without one is left to the LRU bounds, as mlx-lm's cache keeps every entry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from mlx_responses.service.engine.mlx_lm_compat import can_trim_prompt_cache
from mlx_responses.service.engine.prompt_cache.trie import IndexedPromptTrie, new_prompt_cache
from mlx_responses.service.engine.prompt_cache.trie import _key as sequence_key

Clock = Callable[[], float]


class Lifetimes(Protocol):
    """How long the entries of one request are kept (service/text/retention.py Retention)."""

    @property
    def memory_only(self) -> bool:
        """Never written to the disk tier."""
        ...

    def ttl(self, end: int) -> float | None:
        """Seconds an entry holding the prompt's first `end` tokens is kept after its last use
        (None: until the LRU bounds evict it)."""
        ...


class _RecordingTrie(IndexedPromptTrie):
    """The indexed trie, remembering the last entry read (the one a fetch served)."""

    def __init__(self) -> None:
        super().__init__()
        self.last: tuple[Any, list[int]] | None = None

    def get(self, model: Any, tokens: list[int]) -> Any:
        self.last = (model, tokens)
        return super().get(model, tokens)

    def holds(self, model: Any, key: bytes) -> bool:
        """Whether the sequence of token bytes `key` (`_key`) is an entry of `model`'s."""
        return key in self._sequences.get(model, {})


class ExpiringPromptCache:
    """mlx-lm's LRU prompt cache (over the indexed trie) whose entries may expire.

    Entries inserted with a `ttl` expire `ttl` seconds after their last use (insert or a fetch
    that served them); those without one are left to the LRU bounds. Expired entries are removed
    before each fetch, so they are never served.
    """

    def __init__(self, max_entries: int, max_bytes: int, clock: Clock = time.monotonic) -> None:
        self.lru = new_prompt_cache(max_entries, max_bytes)
        self._trie = _RecordingTrie()
        self.lru._trie = self._trie
        self.clock = clock
        # (model, token bytes) -> (ttl, expires at, tokens); only entries that expire.
        self._lives: dict[tuple[Any, bytes], tuple[float, float, list[int]]] = {}
        self.expired = 0  # entries removed for their age

    @property
    def nbytes(self) -> int:
        return int(self.lru.nbytes)

    def __len__(self) -> int:
        return len(self.lru)

    def insert_cache(
        self,
        model: Any,
        tokens: list[int],
        cache: list[Any],
        ttl: float | None = None,
        kind: str = "assistant",
    ) -> None:
        """mlx-lm's insert; `ttl`: seconds the entry is kept after its last use (None: LRU);
        `kind`: mlx-lm's cache type, which its eviction balances (`prompt_cache.KINDS`)."""
        self.lru.insert_cache(model, tokens, cache, cache_type=kind)
        if ttl is None:
            if self._lives:  # written again without one: the LRU's now
                self._lives.pop((model, sequence_key(tokens)), None)
        else:
            self._lives[(model, sequence_key(tokens))] = (ttl, self.clock() + ttl, list(tokens))

    def fetch_nearest_cache(self, model: Any, tokens: list[int]) -> tuple[Any, list[int]]:
        """mlx-lm's fetch, over the entries that have not expired; the entry it serves from is
        used (its expiry moves on)."""
        self.expire()
        self._trie.last = None
        cache, rest = self.lru.fetch_nearest_cache(model, tokens)
        if cache is not None and self._trie.last is not None:
            self._touch(*self._trie.last)
        return cache, rest

    def fetch_serving(self, model: Any, tokens: list[int]) -> tuple[Any, list[int]]:
        """`fetch_nearest_cache`, past an entry holding all of `tokens` that cannot be trimmed
        (a checkpoint where a prompt ended: the repeat must still feed its last token): then
        the nearest entry of all but the last token serves."""
        self.expire()
        key = sequence_key(tokens)
        if tokens and self._trie.holds(model, key):
            entry = IndexedPromptTrie.get(self._trie, model, tokens)
            if not can_trim_prompt_cache(entry.prompt_cache):
                cache, rest = self.fetch_nearest_cache(model, tokens[:-1])
                return cache, [*rest, tokens[-1]]
        return self.fetch_nearest_cache(model, tokens)

    def trim_to(self, *, n_sequences: int | None = None, n_bytes: int | None = None) -> None:
        self.lru.trim_to(n_sequences=n_sequences, n_bytes=n_bytes)

    def expire(self) -> None:
        """Removes the entries past their expiry (and forgets those the LRU evicted)."""
        now = self.clock()
        for key, (_, expires, tokens) in list(self._lives.items()):
            model = key[0]
            if not self._trie.holds(model, key[1]):
                del self._lives[key]  # evicted, or replaced by a longer entry
            elif expires <= now:
                del self._lives[key]
                self._remove(model, tokens)
                self.expired += 1

    def _touch(self, model: Any, tokens: list[int]) -> None:
        if not self._lives:
            return
        key = (model, sequence_key(tokens))
        life = self._lives.get(key)
        if life is not None:
            self._lives[key] = (life[0], self.clock() + life[0], life[2])

    def _remove(self, model: Any, tokens: list[int]) -> None:
        """Takes one entry out of mlx-lm's trie, LRU order and byte counts."""
        lru = self.lru
        entry = lru._trie.pop(model, tokens)
        lru._lru.remove(model, tokens)
        lru._n_bytes -= entry.nbytes
        lru._n_bytes_by_type[entry.cache_type] -= entry.nbytes
