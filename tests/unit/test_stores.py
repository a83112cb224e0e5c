"""The bounded LRU and the in-memory stores: entry limits, byte budgets, TTL, LRU order."""

from __future__ import annotations

import asyncio

from mlx_responses.v1 import responses_pb2 as pb
from service.stores.base import StoredResponse
from service.stores.lru import BoundedLru
from service.stores.memory import InMemoryConversationStore, InMemoryResponseStore


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


def _stored(rid: str, text: str) -> StoredResponse:
    item = pb.Item(
        message=pb.MessageItem(
            role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text=text))]
        )
    )
    return StoredResponse(response=pb.Response(id=rid, store=True), context=[item])


def test_response_store_round_trip_and_delete() -> None:
    async def scenario() -> None:
        store = InMemoryResponseStore(10, 10_000, 0)
        assert await store.put(_stored("resp_a", "x"))
        got = await store.get("resp_a")
        assert got is not None and got.response.id == "resp_a"
        assert await store.delete("resp_a")
        assert not await store.delete("resp_a")
        assert await store.get("resp_a") is None

    asyncio.run(scenario())


def test_response_store_bytes_stay_within_budget_under_load() -> None:
    async def scenario() -> None:
        budget = 5_000
        store = InMemoryResponseStore(1000, budget, 0)
        for i in range(500):
            await store.put(_stored(f"resp_{i}", "y" * (i % 300)))
            assert (await store.occupancy()).bytes <= budget
        occupancy = await store.occupancy()
        assert occupancy.evictions > 0 and occupancy.entries > 0

    asyncio.run(scenario())


def test_conversation_append_accumulates() -> None:
    async def scenario() -> None:
        store = InMemoryConversationStore(10, 10_000, 0)
        a = _stored("r", "one").context
        b = _stored("r", "two").context
        await store.append("conv", a)
        await store.append("conv", b)
        items = await store.items("conv")
        assert [i.message.content[0].input_text.text for i in items] == ["one", "two"]
        assert await store.items("other") == []

    asyncio.run(scenario())
