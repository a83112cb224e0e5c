"""`GET /v1/responses/{id}?stream=true&starting_after=N`: replay a background response, follow it.

A job records every event before anyone sees it (service/responses/event_writer.py), so a replay
of the record followed by the live events, deduplicated by sequence number, hands a reconnecting
client each event exactly once, with the sequence numbers of the first time. A job running on
this core is replayed from its own list and followed through its watcher queue; one running on
another replica (a shared Redis log) is read from the log and followed by polling it until its
terminal event; a finished one is replayed from the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from mlx_responses.service.errors import Reason, ServiceError, invalid
from mlx_responses.service.responses.events import TERMINAL_EVENT as TERMINAL_EVENTS
from mlx_responses.service.responses.jobs import REMOTE_POLL_S, JobManager
from mlx_responses.service.stores.base import EventLog

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

Batch = list[ev.ResponseEvent]
TERMINAL_TYPES = set(TERMINAL_EVENTS.values())


def _terminal(batch: Batch) -> bool:
    return bool(batch) and batch[-1].type in TERMINAL_TYPES


@dataclass
class JobReplay:
    """Replays and follows background responses from the event log."""

    jobs: JobManager
    events: EventLog

    async def _check(self, response_id: str, starting_after: int | None) -> pb.Response:
        if starting_after is not None and starting_after < 0:
            raise invalid(
                f"Invalid 'starting_after': {starting_after}; expected a sequence number >= 0.",
                "starting_after",
                "invalid_value",
            )
        found = await self.jobs.find(response_id)
        if found is None:
            raise ServiceError(
                Reason.NOT_FOUND, f"Response with id '{response_id}' not found.", param="id"
            )
        if not found.background:
            raise invalid(
                f"Response '{response_id}' was not created with background=true; only "
                "background responses can be streamed after they were created.",
                "stream",
            )
        return found

    async def stream(self, response_id: str, starting_after: int | None) -> AsyncIterator[Batch]:
        """The events after `starting_after` (all without it), then the live ones, to the end."""
        found = await self._check(response_id, starting_after)
        start = 0 if starting_after is None else starting_after + 1
        job = self.jobs.active.get(response_id)
        queue: asyncio.Queue[Batch | None] = asyncio.Queue()
        if job is not None:
            job.watchers.append(queue)  # before reading the log: nothing falls in between
        try:
            # A job of this core: its own list, read with the subscription (no await between).
            logged = list(job.log.events) if job is not None and job.log is not None else None
            if job is None:
                logged = await self.events.read(response_id, 0)
            if logged is None and job is None and await self.jobs.status_of(response_id) is None:
                # Finished, and its log is gone (evicted): its final object is what there is.
                logged = [_final_event(found)]
            logged = logged or []
            if start > len(logged):
                raise invalid(
                    f"Invalid 'starting_after': {starting_after}; response '{response_id}' has "
                    f"streamed {len(logged)} events so far (sequence numbers from 0).",
                    "starting_after",
                    "invalid_value",
                )
            first = logged[start:]
            if first:
                yield first
            if _terminal(logged):
                return
            start = len(logged)
            if job is not None:
                async for batch in _live(queue, start):
                    yield batch
            else:
                async for batch in self._poll(response_id, start):
                    yield batch
        finally:
            if job is not None:
                job.watchers.remove(queue)

    async def _poll(self, response_id: str, start: int) -> AsyncIterator[Batch]:
        """Follows a job of another replica through the shared log."""
        while True:
            running = await self.jobs.status_of(response_id) is not None
            batch = await self.events.read(response_id, start) or []
            if batch:
                yield batch
                start += len(batch)
                if _terminal(batch):
                    return
            elif not running:
                # Its owner died before logging an end: close with the object as it stands.
                found = await self.jobs.find(response_id)
                if found is not None:
                    yield [_final_event(found, start)]
                return
            else:
                await asyncio.sleep(REMOTE_POLL_S)


async def _live(queue: asyncio.Queue[Batch | None], start: int) -> AsyncIterator[Batch]:
    """The job's published batches from sequence number `start` on, until it ends."""
    while (batch := await queue.get()) is not None:
        fresh = [e for e in batch if e.sequence_number >= start]
        if fresh:
            yield fresh
            start = fresh[-1].sequence_number + 1
            if _terminal(fresh):
                return


def _final_event(final: pb.Response, sequence: int = 0) -> ev.ResponseEvent:
    return ev.ResponseEvent(
        type=TERMINAL_EVENTS.get(final.status, ev.EVENT_TYPE_RESPONSE_FAILED),
        sequence_number=sequence,
        snapshot=ev.ResponseSnapshotEvent(response=final),
    )
