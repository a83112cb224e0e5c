"""One background job's events: kept here in order, written to the shared log in coalesced batches.

The job hands each batch over without waiting for the store (so a Redis round trip per token
never slows it), and a writer task appends whatever has gathered, at most once per FLUSH_S: a
300-token job makes tens of writes, not hundreds. Replays of a job running on this core read
`events` here; a replay on another replica reads the shared log, at most one flush behind, and
the job drains the writer before it leaves the board, so a finished job's log is whole.
"""

from __future__ import annotations

import asyncio
import logging

from mlx_responses.service.errors import ServiceError
from mlx_responses.service.responses.events import TERMINAL_EVENT
from mlx_responses.service.stores.base import EventLog

from mlx_responses.v1 import events_pb2 as ev

log = logging.getLogger(__name__)

FLUSH_S = 0.02
TERMINAL_TYPES = set(TERMINAL_EVENT.values())


class JobEvents:
    """The events of one job, in sequence order, and their way into the shared log."""

    def __init__(self, store: EventLog, response_id: str) -> None:
        self.events: list[ev.ResponseEvent] = []
        self._store = store
        self._response_id = response_id
        self._pending: list[ev.ResponseEvent] = []
        self._writer: asyncio.Task[None] | None = None

    @property
    def next_sequence(self) -> int:
        return len(self.events)

    @property
    def ended(self) -> bool:
        """Whether the terminal event is among them."""
        return bool(self.events) and self.events[-1].type in TERMINAL_TYPES

    def add(self, events: list[ev.ResponseEvent]) -> None:
        """Takes a batch (its sequence numbers continue the list); written soon."""
        self.events += events
        self._pending += events
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(
                self._write(), name=f"job-events-{self._response_id}"
            )

    async def _write(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._store.append(self._response_id, batch)
            except ServiceError as error:
                log.warning("response %s: events not logged: %s", self._response_id, error.message)
            except Exception:
                log.exception("response %s: events not logged", self._response_id)
            if self._pending:
                await asyncio.sleep(FLUSH_S)  # let the next ones gather into one write

    async def drain(self) -> None:
        """Waits until everything added is written (a cancel of the caller spares the writer)."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)
