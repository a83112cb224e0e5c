"""Graceful drain of the façade's open SSE streams on shutdown, as `serve` drains its core's.

Open streams get the grace to finish; those still running are then cancelled on their core
(`CancelResponse`), which ends each as an explicit cancel does: a terminal `response.failed`
event with status `cancelled` and the output so far, stored as such, sequence numbers intact.
A core that cannot cancel one (unreachable, its store disabled, the response unknown to it)
leaves the façade to cut the call and end the stream with its own terminal `response.failed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from aiohttp import web
from mlx_responses.http_facade.kit.client import CoreClient, CoreEventStream
from mlx_responses.http_facade.kit.errors import OpenAIError

log = logging.getLogger(__name__)

POLL_SECS = 0.05
# How long a cancelled stream gets to deliver its terminal event (one decode step, in practice).
CANCEL_WAIT_SECS = 10.0
# Refusals meaning the core is going away and ends the stream by itself (its own drain).
CORE_ENDING = frozenset({"model_not_ready", "core_unavailable"})
SHUTDOWN_MESSAGE = "The server shut down before the response finished."


@dataclass
class OpenStream:
    """One SSE stream being relayed: its response, the core call, and the caller's context."""

    response_id: str
    client: CoreClient
    stream: CoreEventStream
    # The request's context (its API key and request id travel with the cancel call).
    context: contextvars.Context = field(default_factory=contextvars.copy_context)
    aborted: bool = False
    # Whether the stream ended cancelled (by an explicit cancel, or its core's own drain).
    ended_cancelled: bool = False
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def was_cancelled(self) -> bool:
        """Ended cancelled, or cut by the drain."""
        return self.ended_cancelled or self.aborted

    def abort(self) -> None:
        """Cuts the core call; the handler ends the stream with its own terminal event."""
        self.aborted = True
        self.stream.cancel()


@dataclass(frozen=True)
class DrainReport:
    """What the drain found: streams that finished within the grace, streams it cancelled."""

    finished: int
    cancelled: int


class OpenStreams:
    """The façade's open streams, so a shutdown can end each with a terminal event."""

    def __init__(self) -> None:
        self._open: dict[int, OpenStream] = {}
        self._ids = itertools.count()

    def __len__(self) -> int:
        return len(self._open)

    @contextlib.contextmanager
    def track(
        self, response_id: str, client: CoreClient, stream: CoreEventStream
    ) -> Iterator[OpenStream]:
        """Registers a stream while its handler relays it."""
        entry = OpenStream(response_id, client, stream)
        key = next(self._ids)
        self._open[key] = entry
        try:
            yield entry
        finally:
            del self._open[key]
            entry.ended.set()

    async def drain(self, grace_secs: float) -> DrainReport:
        """Waits up to `grace_secs` for the open streams, then cancels those still running."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_secs
        seen = dict(self._open)
        while self._open and loop.time() < deadline:
            seen.update(self._open)
            await asyncio.sleep(POLL_SECS)
        remaining = list(self._open.values())
        if remaining:
            log.warning("shutdown: grace over, cancelling %d open streams", len(remaining))
            await asyncio.gather(
                *(loop.create_task(self._cancel(s), context=s.context) for s in remaining)
            )
        # A stream that ended within the grace may have ended cancelled (its core drained it
        # first, as `serve`'s core does): it counts as cancelled, as the core counts it.
        cut = {id(s) for s in remaining}
        cancelled = sum(1 for s in seen.values() if id(s) in cut or s.was_cancelled)
        return DrainReport(finished=len(seen) - cancelled, cancelled=cancelled)

    async def _cancel(self, stream: OpenStream) -> None:
        try:
            await asyncio.wait_for(stream.client.cancel(stream.response_id), CANCEL_WAIT_SECS)
        except (OpenAIError, TimeoutError) as exc:
            code = exc.code if isinstance(exc, OpenAIError) else "timeout"
            log.warning(
                "shutdown: response %s not cancelled by its core (%s)", stream.response_id, code
            )
            if code not in CORE_ENDING:
                stream.abort()
                return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stream.ended.wait(), CANCEL_WAIT_SECS)
        if not stream.ended.is_set():
            stream.abort()


STREAMS = web.AppKey("open_streams", OpenStreams)


def install_drain(app: web.Application, grace_secs: float) -> None:
    """Tracks the app's open streams and drains them when the app shuts down."""
    app[STREAMS] = OpenStreams()

    async def drain(app: web.Application) -> None:
        streams = app[STREAMS]
        if len(streams):
            log.info(
                "shutting down: %d open streams get up to %gs to finish", len(streams), grace_secs
            )
        report = await streams.drain(grace_secs)
        if report.finished or report.cancelled:
            log.info(
                "streams drained: %d finished in the grace period, %d cancelled",
                report.finished,
                report.cancelled,
            )

    app.on_shutdown.append(drain)
