"""One store suite, run against the memory backend and a real redis-server: same semantics."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.stores.base import (
    Admission,
    ConversationStore,
    EventLog,
    JobBoard,
    ResponseStore,
    StoredResponse,
)
from mlx_responses.service.stores.memory import (
    InMemoryConversationStore,
    InMemoryEventLog,
    InMemoryJobBoard,
    InMemoryResponseStore,
)
from mlx_responses.service.stores.redis_jobs import RedisJobBoard
from mlx_responses.service.stores.redis_store import (
    RedisBoundedMap,
    RedisConversationStore,
    RedisEventLog,
    RedisResponseStore,
    connect,
)
from mlx_responses.service.stores.transcript import header_bytes, new_info

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st
from tests.support.redis_server import RedisServer
from tests.support.waits import DEADLINE_S, until_async


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Backend:
    """Builds stores of one backend; `replica` gives a second handle on the same shared data."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.namespace = f"test-{uuid.uuid4().hex[:8]}"
        self.clients: list[aioredis.Redis] = []
        self._memory: dict[tuple[Any, ...], Any] = {}

    @property
    def name(self) -> str:
        return "memory" if self.url is None else "redis"

    def _client(self) -> aioredis.Redis:
        assert self.url is not None
        client = connect(self.url)
        self.clients.append(client)
        return client

    def _map(self, kind: str, limits: tuple[int, int, float], clock: Callable[[], float]) -> Any:
        return RedisBoundedMap(self._client(), f"{self.namespace}:{kind}", *limits, clock=clock)

    def responses(
        self, max_entries: int, max_bytes: int, ttl: float = 0, clock: Clock | None = None
    ) -> ResponseStore:
        clock = clock or Clock()
        if self.url is None:
            key = ("responses", max_entries, max_bytes, ttl)
            return self._memory.setdefault(
                key, InMemoryResponseStore(max_entries, max_bytes, ttl, clock)
            )
        return RedisResponseStore(self._map("responses", (max_entries, max_bytes, ttl), clock))

    def conversations(
        self, max_entries: int, max_bytes: int, ttl: float = 0, clock: Clock | None = None
    ) -> ConversationStore:
        clock = clock or Clock()
        if self.url is None:
            key = ("conversations", max_entries, max_bytes, ttl)
            return self._memory.setdefault(
                key, InMemoryConversationStore(max_entries, max_bytes, ttl, clock)
            )
        return RedisConversationStore(
            self._map("conversations", (max_entries, max_bytes, ttl), clock)
        )

    def events(
        self, max_entries: int, max_bytes: int, ttl: float = 0, clock: Clock | None = None
    ) -> EventLog:
        clock = clock or Clock()
        if self.url is None:
            key = ("events", max_entries, max_bytes, ttl)
            return self._memory.setdefault(
                key, InMemoryEventLog(max_entries, max_bytes, ttl, clock)
            )
        return RedisEventLog(self._map("events", (max_entries, max_bytes, ttl), clock))

    def board(self, ttl: float = 60, clock: Clock | None = None) -> JobBoard:
        if self.url is None:
            return self._memory.setdefault(("board", ttl), InMemoryJobBoard(1 << 20, ttl))
        if clock is None:
            return RedisJobBoard(self._client(), self.namespace, 1 << 20, ttl)
        return RedisJobBoard(self._client(), self.namespace, 1 << 20, ttl, clock=clock)

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()


@pytest.fixture(params=["memory", "redis"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    url = None
    if request.param == "redis":
        url = request.getfixturevalue("redis_server").url()
    made = Backend(url)
    yield made
    await made.close()


def _item(text: str) -> pb.Item:
    return pb.Item(
        message=pb.MessageItem(
            role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text=text))]
        )
    )


def _stored(rid: str, text: str) -> StoredResponse:
    return StoredResponse(response=pb.Response(id=rid, store=True), context=[_item(text)])


def _texts(items: list[pb.Item]) -> list[str]:
    return [i.message.content[0].input_text.text for i in items]


async def test_response_store_round_trip_and_delete(backend: Backend) -> None:
    store = backend.responses(10, 10_000)
    stored = _stored("resp_a", "x")
    stored.context.append(_item("y"))
    assert await store.put(stored)
    got = await store.get("resp_a")
    assert got is not None and got.response.id == "resp_a" and _texts(got.context) == ["x", "y"]
    assert await store.delete("resp_a")
    assert not await store.delete("resp_a")
    assert await store.get("resp_a") is None


async def test_response_store_bytes_stay_within_budget_under_load(backend: Backend) -> None:
    budget = 5_000
    store = backend.responses(1000, budget)
    for i in range(300):
        await store.put(_stored(f"resp_{i}", "y" * (i % 300)))
        assert (await store.occupancy()).bytes <= budget
    occupancy = await store.occupancy()
    assert occupancy.evictions > 0 and occupancy.entries > 0
    assert occupancy.max_bytes == budget and occupancy.max_entries == 1000


async def test_entry_limit_evicts_least_recently_used(backend: Backend) -> None:
    store = backend.responses(2, 10_000)
    await store.put(_stored("a", "1"))
    await store.put(_stored("b", "2"))
    assert await store.get("a") is not None  # a is now the most recent
    await store.put(_stored("c", "3"))
    assert await store.get("b") is None
    assert await store.get("a") is not None and await store.get("c") is not None
    occupancy = await store.occupancy()
    assert occupancy.entries == 2 and occupancy.evictions == 1


async def test_zero_bytes_evicts_at_once_but_stays_enabled(backend: Backend) -> None:
    store = backend.responses(10, 0)
    assert store.enabled
    assert await store.put(_stored("a", "1")) is False
    assert await store.get("a") is None
    assert (await store.occupancy()).bytes == 0


async def test_zero_entries_disables(backend: Backend) -> None:
    store = backend.responses(0, 100)
    assert not store.enabled
    assert await store.put(_stored("a", "1")) is False
    assert not backend.conversations(0, 100).enabled


async def test_ttl_expiry_frees_bytes(backend: Backend) -> None:
    clock = Clock()
    store = backend.responses(10, 10_000, ttl=5, clock=clock)
    await store.put(_stored("a", "1"))
    clock.now += 4.9
    assert await store.get("a") is not None
    clock.now += 0.1
    assert await store.get("a") is None
    occupancy = await store.occupancy()
    assert occupancy.bytes == 0 and occupancy.entries == 0 and occupancy.evictions == 1


async def test_replacing_a_response_keeps_bytes_exact(backend: Backend) -> None:
    store = backend.responses(10, 10_000)
    big, small = _stored("a", "x" * 50), _stored("a", "y")
    await store.put(big)
    await store.put(small)
    occupancy = await store.occupancy()
    assert occupancy.bytes == small.nbytes() and occupancy.entries == 1


async def test_conversation_append_accumulates(backend: Backend) -> None:
    store = backend.conversations(10, 10_000)
    assert not await store.exists("conv")
    await store.append("conv", [_item("one")])
    await store.append("conv", [_item("two"), _item("three")])
    assert _texts(await store.items("conv")) == ["one", "two", "three"]
    assert await store.exists("conv")
    assert await store.items("other") == []
    occupancy = await store.occupancy()
    assert occupancy.entries == 1
    info = await store.info("conv")
    assert info is not None and info.id == "conv" and info.created_at > 0
    # The conversation object (its header) counts against the budget with the items.
    items = sum(_item(t).ByteSize() for t in ("one", "two", "three"))
    assert occupancy.bytes == header_bytes(info) + items
    assert await store.delete("conv") and not await store.exists("conv")
    assert (await store.occupancy()).bytes == 0


async def test_conversation_over_budget_is_dropped_whole(backend: Backend) -> None:
    limit = header_bytes(new_info("conv")) + _item("a" * 10).ByteSize() * 2
    store = backend.conversations(10, limit)
    await store.append("conv", [_item("a" * 10)])
    await store.append("conv", [_item("a" * 10)])
    assert len(await store.items("conv")) == 2
    await store.append("conv", [_item("a" * 10)])
    assert await store.items("conv") == [] and not await store.exists("conv")
    occupancy = await store.occupancy()
    assert occupancy.bytes == 0 and occupancy.evictions == 1


async def test_conversation_ttl_restarts_at_each_append(backend: Backend) -> None:
    clock = Clock()
    store = backend.conversations(10, 10_000, ttl=5, clock=clock)
    await store.append("conv", [_item("one")])
    clock.now += 4
    await store.append("conv", [_item("two")])
    clock.now += 4
    assert _texts(await store.items("conv")) == ["one", "two"]
    clock.now += 1
    assert not await store.exists("conv")


async def test_conversation_lru_across_transcripts(backend: Backend) -> None:
    store = backend.conversations(2, 10_000)
    await store.append("a", [_item("1")])
    await store.append("b", [_item("2")])
    await store.items("a")
    await store.append("c", [_item("3")])
    assert await store.exists("a") and await store.exists("c") and not await store.exists("b")


async def test_concurrent_appends_from_two_replicas_all_land(backend: Backend) -> None:
    first = backend.conversations(10, 1_000_000)
    second = backend.conversations(10, 1_000_000)  # memory: the same store; redis: new client
    words = [f"w{i}" for i in range(40)]
    await asyncio.gather(
        *(
            (first if i % 2 else second).append("conv", [_item(w), _item(w)])
            for i, w in enumerate(words)
        )
    )
    got = _texts(await first.items("conv"))
    assert sorted(got) == sorted(w for w in words for _ in range(2))
    # Each append is atomic: a turn's two items stay together.
    assert all(got[i] == got[i + 1] for i in range(0, len(got), 2))


def _with_id(item: pb.Item, item_id: str) -> pb.Item:
    item.message.id = item_id
    return item


async def test_conversation_object_metadata_and_item_removal(backend: Backend) -> None:
    store = backend.conversations(10, 100_000)
    info = st.ConversationObject(id="conv_x", created_at=1234, metadata={"topic": "demo"})
    assert await store.append("conv_x", [_with_id(_item("one"), "msg_1")], info)
    # A later append keeps the object it was created with.
    await store.append("conv_x", [_with_id(_item("two"), "msg_2"), _with_id(_item("3"), "msg_3")])
    held = await store.info("conv_x")
    assert held == info
    updated = await store.set_metadata("conv_x", {"topic": "other", "k": "v"})
    assert updated is not None and dict(updated.metadata) == {"topic": "other", "k": "v"}
    assert updated.created_at == 1234 and await store.info("conv_x") == updated
    assert await store.remove_item("conv_x", "msg_2")
    assert not await store.remove_item("conv_x", "msg_2")
    assert not await store.remove_item("missing", "msg_1")
    assert _texts(await store.items("conv_x")) == ["one", "3"]
    occupancy = await store.occupancy()
    expected = header_bytes(updated) + _item("one").ByteSize() + _item("3").ByteSize()
    assert occupancy.bytes == expected + len("msg_1") + len("msg_3") + 4  # the ids' bytes
    assert await store.set_metadata("missing", {}) is None
    assert await store.info("missing") is None
    assert await store.delete("conv_x") and (await store.occupancy()).bytes == 0


async def test_conversation_objects_from_two_replicas(backend: Backend) -> None:
    first = backend.conversations(10, 100_000)
    second = backend.conversations(10, 100_000)
    await first.append("conv_y", [_with_id(_item("one"), "msg_a")], new_info("conv_y", {"a": "b"}))
    assert dict((await second.set_metadata("conv_y", {"c": "d"})).metadata) == {"c": "d"}  # type: ignore[union-attr]
    assert dict((await first.info("conv_y")).metadata) == {"c": "d"}  # type: ignore[union-attr]
    assert await second.remove_item("conv_y", "msg_a")
    assert await first.items("conv_y") == [] and await first.exists("conv_y")


def _events(start: int, count: int) -> list[ev.ResponseEvent]:
    return [
        ev.ResponseEvent(
            type=ev.EVENT_TYPE_OUTPUT_TEXT_DELTA,
            sequence_number=n,
            text_delta=ev.TextDeltaEvent(item_id="msg", delta=f"d{n}"),
        )
        for n in range(start, start + count)
    ]


async def test_event_log_appends_reads_from_a_position_and_deletes(backend: Backend) -> None:
    log = backend.events(10, 1_000_000)
    assert await log.read("resp_1", 0) is None
    await log.append("resp_1", _events(0, 3))
    await log.append("resp_1", _events(3, 2))
    assert [e.sequence_number for e in await log.read("resp_1", 0) or []] == [0, 1, 2, 3, 4]
    assert [e.text_delta.delta for e in await log.read("resp_1", 3) or []] == ["d3", "d4"]
    assert await log.read("resp_1", 5) == []
    assert await log.delete("resp_1") and await log.read("resp_1", 0) is None
    assert not await log.delete("resp_1")


async def test_event_log_is_bounded_and_expires(backend: Backend) -> None:
    clock = Clock()
    batch = _events(0, 4)
    size = sum(e.ByteSize() for e in batch)
    log = backend.events(2, size * 2, ttl=5, clock=clock)
    for rid in ("resp_a", "resp_b", "resp_c"):
        await log.append(rid, batch)
    assert await log.read("resp_a", 0) is None  # the least recently used went first
    assert len(await log.read("resp_c", 0) or []) == 4
    clock.now += 6
    assert await log.read("resp_c", 0) is None


async def test_concurrent_puts_from_two_replicas_hold_the_limits(backend: Backend) -> None:
    first, second = backend.responses(20, 3_000), backend.responses(20, 3_000)
    await asyncio.gather(
        *((first if i % 2 else second).put(_stored(f"r{i}", "z" * 40)) for i in range(200))
    )
    occupancy = await second.occupancy()
    assert occupancy.entries <= 20 and occupancy.bytes <= 3_000
    assert occupancy.entries + occupancy.evictions == 200


async def _subscribed(board: JobBoard) -> None:
    """Until the board's cancel subscription, set up in the background, is live: Redis counts
    it (a cancel published before would be lost); the memory board hears from its listen on."""
    if isinstance(board, RedisJobBoard):
        channel = board._channel

        async def counted() -> bool:
            return bool((await board._client.pubsub_numsub(channel))[0][1])

        await until_async(counted, "the cancel subscription live")


async def test_job_board_views_kept_objects_and_cancel_requests(backend: Backend) -> None:
    owner, other = backend.board(), backend.board()
    heard: list[str] = []
    got_one = asyncio.Event()

    def on_cancel(rid: str) -> None:
        heard.append(rid)
        got_one.set()

    await owner.listen(on_cancel)
    await _subscribed(owner)
    view = pb.Response(id="resp_j", status=pb.RESPONSE_STATUS_QUEUED, background=True)
    assert await owner.admit(view, 100, 8, 10_000, 10) is Admission.ADMITTED
    view.status = pb.RESPONSE_STATUS_IN_PROGRESS
    await owner.post(view, 10)
    seen = await other.view("resp_j")
    assert seen is not None and seen.status == pb.RESPONSE_STATUS_IN_PROGRESS
    await other.request_cancel("resp_j")
    await asyncio.wait_for(got_one.wait(), DEADLINE_S)
    assert heard == ["resp_j"]
    if backend.name == "redis":
        # The fallback for a lost message: the owner's heartbeat sees the cancel key.
        assert await owner.renew(["resp_j", "resp_other"], 10) == ["resp_j"]
    await owner.remove("resp_j")
    assert await other.view("resp_j") is None
    final = pb.Response(id="resp_j", status=pb.RESPONSE_STATUS_CANCELLED, store=False)
    assert await owner.keep(final, final.ByteSize())
    kept = await other.kept("resp_j")
    assert kept is not None and kept.status == pb.RESPONSE_STATUS_CANCELLED
    assert await other.forget("resp_j") and await owner.kept("resp_j") is None
    await owner.close()
    await other.close()


async def test_job_board_admission_counts_every_replica(backend: Backend) -> None:
    one, two = backend.board(), backend.board()

    def job(rid: str) -> pb.Response:
        return pb.Response(id=rid, status=pb.RESPONSE_STATUS_QUEUED, background=True)

    # Limits: 2 jobs, 1000 bytes in all, whichever replica admits them.
    assert await one.admit(job("j1"), 600, 2, 1000, 10) is Admission.ADMITTED
    assert await two.admit(job("j2"), 500, 2, 1000, 10) is Admission.OVER_BUDGET
    assert await two.view("j2") is None, "a refused job is not posted"
    assert await two.admit(job("j2"), 400, 2, 1000, 10) is Admission.ADMITTED
    assert await one.admit(job("j3"), 1, 2, 1000, 10) is Admission.TOO_MANY_JOBS
    # Concurrent admissions on both replicas never overshoot.
    await one.remove("j1")
    await two.remove("j2")
    replies = await asyncio.gather(
        *((one if i % 2 else two).admit(job(f"c{i}"), 10, 3, 1000, 10) for i in range(20))
    )
    assert replies.count(Admission.ADMITTED) == 3
    # A removed job frees its slot and its bytes.
    admitted = [f"c{i}" for i, a in enumerate(replies) if a is Admission.ADMITTED]
    await two.remove(admitted[0])
    assert await one.admit(job("big"), 990, 3, 1000, 10) is Admission.OVER_BUDGET
    assert await one.admit(job("fits"), 980, 3, 1000, 10) is Admission.ADMITTED
    # An update of a job that was never admitted (or was removed) posts nothing.
    await one.post(job(admitted[0]), 10)
    assert await two.view(admitted[0]) is None
    await one.close()
    await two.close()


async def test_redis_dead_replicas_jobs_leave_the_count_with_their_lease(
    redis_server: RedisServer,
) -> None:
    backend = Backend(redis_server.url())
    clock = Clock()  # the index's deadlines follow the callers' clock
    dead, alive = backend.board(clock=clock), backend.board(clock=clock)
    job = pb.Response(id="resp_orphan", status=pb.RESPONSE_STATUS_QUEUED)
    assert await dead.admit(job, 10, 1, 1000, 20) is Admission.ADMITTED
    other = pb.Response(id="resp_next", status=pb.RESPONSE_STATUS_QUEUED)
    clock.now += 10
    assert await alive.admit(other, 10, 1, 1000, 20) is Admission.TOO_MANY_JOBS
    # A renewed lease keeps a job counted; an unrenewed one runs out.
    await dead.renew(["resp_orphan"], 30)
    clock.now += 25
    assert await alive.admit(other, 10, 1, 1000, 20) is Admission.TOO_MANY_JOBS
    clock.now += 10
    assert await alive.admit(other, 10, 1, 1000, 20) is Admission.ADMITTED
    await backend.close()


async def test_redis_foreground_claims_cancel_asks_and_answers(redis_server: RedisServer) -> None:
    backend = Backend(redis_server.url())
    owner, other = backend.board(), backend.board()
    await owner.claim("resp_f", 10)
    assert await other.claimed("resp_f") and not await other.claimed("resp_none")
    assert await owner.renew_claims(["resp_f"], 10) == []
    await other.request_cancel("resp_f")
    assert await owner.renew_claims(["resp_f", "resp_none"], 10) == ["resp_f"]
    assert await other.answered("resp_f") is None
    await owner.answer(pb.Response(id="resp_f", status=pb.RESPONSE_STATUS_CANCELLED))
    await owner.unclaim("resp_f")
    assert not await other.claimed("resp_f")
    assert await owner.renew_claims(["resp_f"], 10) == [], "the cancel key went with the claim"
    answer = await other.answered("resp_f")
    assert answer is not None and answer.status == pb.RESPONSE_STATUS_CANCELLED
    await owner.claim("resp_short", 0.2)
    await asyncio.sleep(0.3)
    assert not await other.claimed("resp_short"), "a dead owner's claim runs out"
    await backend.close()


async def test_redis_job_lease_runs_out_without_heartbeats(redis_server: RedisServer) -> None:
    backend = Backend(redis_server.url())
    board = backend.board()
    assert await board.admit(pb.Response(id="resp_dead"), 1, 1, 10, 0.2) is Admission.ADMITTED
    assert await board.view("resp_dead") is not None
    await asyncio.sleep(0.3)
    assert await board.view("resp_dead") is None
    await backend.close()


async def test_redis_down_is_store_unavailable_then_recovers(redis_server: RedisServer) -> None:
    backend = Backend(redis_server.url())
    store = backend.responses(10, 10_000)
    assert await store.put(_stored("resp_keep", "kept"))
    await store.check()
    redis_server.stop()
    try:
        for call in (store.get("resp_keep"), store.check()):
            with pytest.raises(ServiceError) as raised:
                await call
            assert raised.value.reason is Reason.STORE_UNAVAILABLE
    finally:
        redis_server.start()
    await store.check()
    got = await store.get("resp_keep")  # the append-only file kept it across the restart
    assert got is not None and _texts(got.context) == ["kept"]
    await backend.close()
