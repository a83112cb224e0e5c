"""The bounded LRU (the memory backend's core); the stores themselves are in test_store_suite."""

from __future__ import annotations

from mlx_responses.service.stores.lru import BoundedLru


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entry_limit_evicts_least_recently_used() -> None:
    lru: BoundedLru[int] = BoundedLru(2, 1000, 0)
    lru.put("a", 1, 1)
    lru.put("b", 2, 1)
    assert lru.get("a") == 1  # a is now the most recent
    lru.put("c", 3, 1)
    assert lru.get("b") is None
    assert lru.get("a") == 1 and lru.get("c") == 3
    assert lru.evictions == 1


def test_byte_budget_holds() -> None:
    lru: BoundedLru[int] = BoundedLru(100, 10, 0)
    for i in range(20):
        lru.put(str(i), i, 3)
        assert lru.bytes <= 10
    assert len(lru) == 3


def test_zero_bytes_evicts_at_once_but_stays_enabled() -> None:
    lru: BoundedLru[int] = BoundedLru(10, 0, 0)
    assert lru.enabled
    assert lru.put("a", 1, 1) is False
    assert lru.get("a") is None


def test_zero_entries_disables() -> None:
    lru: BoundedLru[int] = BoundedLru(0, 100, 0)
    assert not lru.enabled
    assert lru.put("a", 1, 1) is False


def test_ttl_expiry() -> None:
    clock = Clock()
    lru: BoundedLru[int] = BoundedLru(10, 100, 5, clock)
    lru.put("a", 1, 1)
    clock.now = 4.9
    assert lru.get("a") == 1
    clock.now = 5.0
    assert lru.get("a") is None
    assert lru.bytes == 0


def test_replacing_a_key_keeps_bytes_exact() -> None:
    lru: BoundedLru[int] = BoundedLru(10, 100, 0)
    lru.put("a", 1, 7)
    lru.put("a", 2, 5)
    assert lru.bytes == 5 and lru.get("a") == 2
