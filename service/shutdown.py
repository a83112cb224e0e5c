"""Graceful drain on shutdown: running work gets a grace period, then is cancelled as such."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
from mlx_responses.service.core import Core
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.rpc.interceptors import refusing_handler

log = logging.getLogger(__name__)

POLL_SECS = 0.05
# How long a cancelled generation gets to end its stream (one decode step, in practice).
CANCEL_WAIT_SECS = 10.0
HEALTH_PREFIX = "/grpc.health.v1.Health/"


@dataclass(frozen=True)
class DrainReport:
    """What the drain found: work that finished within the grace, work it cancelled."""

    finished: int
    cancelled: int


class DrainInterceptor(grpc.aio.ServerInterceptor):
    """Refuses new calls (503, "shutting down") once the drain began; health stays answered.

    NOTE: not `server.stop(grace)` at once: that would also hold the shutdown for the whole
    grace on long-lived calls such as a façade's Health.Watch.
    """

    def __init__(self, core: Core) -> None:
        self._core = core

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or not self._core.draining or method.startswith(HEALTH_PREFIX):
            return handler
        return refusing_handler(
            handler, ServiceError(Reason.NOT_READY, "The server is shutting down; retry later.")
        )


def _running(core: Core) -> set[str]:
    jobs = core.jobs_if_ready
    running = set(core.pipeline.in_flight)
    if jobs is not None:
        running |= set(jobs.active)
    return running


async def drain(core: Core, grace_secs: float) -> DrainReport:
    """Waits up to `grace_secs` for generations and background jobs, then cancels the rest.

    Cancelled ones end with status `cancelled` (streams get their terminal event, background
    jobs their final object), exactly as an explicit cancel would end them.
    """
    core.draining = True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_secs
    seen = _running(core)
    while (running := _running(core)) and loop.time() < deadline:
        seen |= running
        await asyncio.sleep(POLL_SECS)
    running = _running(core)
    if running:
        log.warning("shutdown: grace over, cancelling %d running responses", len(running))
        await asyncio.gather(*(_cancel(core, rid) for rid in running))
    return DrainReport(finished=len(seen - running), cancelled=len(running))


async def _cancel(core: Core, response_id: str) -> None:
    jobs = core.jobs_if_ready
    try:
        if jobs is not None and response_id in jobs.active:
            await asyncio.wait_for(jobs.cancel(response_id), CANCEL_WAIT_SECS)
        else:
            await core.pipeline.in_flight.cancel(response_id, CANCEL_WAIT_SECS)
    except Exception as exc:  # one stuck response must not keep the others running
        log.warning("shutdown: response %s did not cancel cleanly: %r", response_id, exc)
