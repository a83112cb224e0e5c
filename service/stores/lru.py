"""A bounded map: LRU by last access, TTL expiry and an approximate byte budget."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass
class _Entry(Generic[V]):
    value: V
    nbytes: int
    expires_at: float | None


class BoundedLru(Generic[V]):
    """Entries beyond `max_entries` or `max_bytes` go oldest-access first; expired ones vanish.

    `max_entries == 0` means disabled (callers refuse use); `max_bytes == 0` keeps nothing.
    """

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl_secs: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_secs = ttl_secs
        self._clock = clock
        self._entries: OrderedDict[str, _Entry[V]] = OrderedDict()
        # One TTL for all: expiry follows put order, so expiring looks only at what is due.
        # Keys only (no values): an evicted entry must not stay alive here until its TTL.
        self._expiry: deque[tuple[float, str]] = deque()
        self.bytes = 0
        self.evictions = 0

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    def _expire(self) -> None:
        now = self._clock()
        while self._expiry and self._expiry[0][0] <= now:
            _, key = self._expiry.popleft()
            entry = self._entries.get(key)
            # Gone or put again since: nothing (or a later expiry) to act on.
            if entry is not None and entry.expires_at is not None and entry.expires_at <= now:
                self._drop(key)
                self.evictions += 1

    def _drop(self, key: str) -> _Entry[V]:
        entry = self._entries.pop(key)
        self.bytes -= entry.nbytes
        return entry

    def put(self, key: str, value: V, nbytes: int) -> bool:
        """Stores `value`; returns False if it could not be kept (disabled or over budget)."""
        if not self.enabled:
            return False
        if key in self._entries:
            self._drop(key)
        self._expire()
        if nbytes > self.max_bytes:
            self.evictions += 1
            return False
        expires = self._clock() + self.ttl_secs if self.ttl_secs > 0 else None
        entry = _Entry(value, nbytes, expires)
        self._entries[key] = entry
        if expires is not None:
            self._expiry.append((expires, key))
            if len(self._expiry) > 2 * len(self._entries) + 64:  # stale keys of evictions
                self._expiry = deque(
                    sorted((e.expires_at, k) for k, e in self._entries.items() if e.expires_at)
                )
        self.bytes += nbytes
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest)
            self.evictions += 1
        return key in self._entries

    def get(self, key: str) -> V | None:
        """The value, refreshed as most recently used; None if absent or expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at is not None and entry.expires_at <= self._clock():
            self._drop(key)
            self.evictions += 1
            return None
        self._entries.move_to_end(key)
        return entry.value

    def pop(self, key: str) -> V | None:
        """Removes and returns the value, if present and alive."""
        value = self.get(key)
        if value is not None:
            self._drop(key)
        return value
