"""A job's events reach the log whole and in order, in fewer writes than batches."""

from __future__ import annotations

import asyncio

from mlx_responses.service.responses.event_writer import JobEvents
from mlx_responses.service.stores.memory import InMemoryEventLog

from mlx_responses.v1 import events_pb2 as ev


class SlowLog(InMemoryEventLog):
    """The memory log with a store round trip that lasts until `answered` is set, counting
    writes."""

    def __init__(self) -> None:
        super().__init__(16, 1 << 20, 0)
        self.writes = 0
        self.answered = asyncio.Event()

    async def append(self, response_id: str, events: list[ev.ResponseEvent]) -> None:
        self.writes += 1
        await self.answered.wait()
        await super().append(response_id, events)


def _delta(n: int) -> list[ev.ResponseEvent]:
    return [ev.ResponseEvent(type=ev.EVENT_TYPE_OUTPUT_TEXT_DELTA, sequence_number=n)]


async def test_batches_coalesce_and_drain_leaves_the_log_whole() -> None:
    store = SlowLog()
    events = JobEvents(store, "resp_1")
    for n in range(50):  # a token at a time, the loop running in between
        events.add(_delta(n))
        await asyncio.sleep(0)
    # The first write is still under way: all that came since waits for it.
    assert store.writes == 1
    final = ev.ResponseEvent(type=ev.EVENT_TYPE_RESPONSE_COMPLETED, sequence_number=50)
    events.add([final])
    assert events.ended and events.next_sequence == 51
    store.answered.set()
    await events.drain()
    logged = await store.read("resp_1", 0) or []
    assert [e.sequence_number for e in logged] == list(range(51))
    assert store.writes == 2  # the first token alone, then the other 50 in one write
