"""Foreground responses claimed on the job board while they run, so any replica can cancel them.

The owner claims a response (a leased key on a shared board; nothing on the in-memory one), and
a cancel asked of another replica reaches it through the board's cancel channel, as a background
job's does. The owner cancels it here and answers with the final object, which the asker returns
(a store:false response is never readable from the store).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mlx_responses.service.errors import ServiceError
from mlx_responses.service.stores.base import JobBoard

from mlx_responses.v1 import responses_pb2 as pb

if TYPE_CHECKING:
    from mlx_responses.service.responses.in_flight import InFlightTurns

log = logging.getLogger(__name__)


@dataclass
class ForegroundClaims:
    """This replica's running foreground responses, as the job board shows them to the others."""

    in_flight: InFlightTurns
    board: JobBoard
    lease_secs: float
    wait_secs: float
    poll_secs: float
    # response id -> the cancel running for another replica (None: none asked yet)
    claims: dict[str, asyncio.Task[bool] | None] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def running(self, response_id: str) -> AsyncIterator[None]:
        """Claims the response while it runs here; an unreachable board never fails it."""
        self.claims[response_id] = None
        try:
            await self.board.claim(response_id, self.lease_secs)
        except ServiceError as error:
            log.warning("response %s: not claimed (%s)", response_id, error.message)
        try:
            yield
        finally:
            task = self.claims.pop(response_id, None)
            if task is not None:
                # The answer is kept before the claim goes, so the asker never misses it.
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(task), self.wait_secs)
            with contextlib.suppress(ServiceError):
                await self.board.unclaim(response_id)

    def cancel_requested(self, response_id: str) -> None:
        """A cancel asked elsewhere (pub/sub or a heartbeat's cancel key): cancels it if ours."""
        if response_id not in self.claims:
            return
        task = self.claims[response_id]
        if task is not None and not (task.done() and not _answered(task)):
            return  # running, or already answered
        # Not yet in flight (still validating) ends False: the next heartbeat asks again.
        log.info("response %s: cancel requested by another replica", response_id)
        self.claims[response_id] = asyncio.get_running_loop().create_task(self._cancel(response_id))

    async def _cancel(self, response_id: str) -> bool:
        final = await self.in_flight.cancel(response_id, self.wait_secs)
        if final is None:
            return False
        await self.board.answer(final)
        return True

    async def cancel_elsewhere(self, response_id: str) -> pb.Response | None:
        """Cancels a foreground response another replica runs; its final object, or None."""
        if not await self.board.claimed(response_id):
            return None
        await self.board.request_cancel(response_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_secs
        while loop.time() < deadline:
            if (final := await self.board.answered(response_id)) is not None:
                return final
            if not await self.board.claimed(response_id):
                # Ended: answered just now, or finished before the cancel reached it.
                return await self.board.answered(response_id)
            await asyncio.sleep(self.poll_secs)
        return None


def _answered(task: asyncio.Task[bool]) -> bool:
    return not task.cancelled() and task.exception() is None and task.result()
