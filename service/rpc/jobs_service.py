"""JobsService: background jobs and cancellation of in-flight responses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc
from mlx_responses.service.core import Core
from mlx_responses.service.errors import invalid
from mlx_responses.service.responses.events import TERMINAL_EVENT
from mlx_responses.service.responses.history import status_name, store_disabled
from mlx_responses.service.responses.job_replay import JobReplay
from mlx_responses.service.rpc.storage_service import not_found

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import jobs_service_pb2 as jobs
from mlx_responses.v1 import jobs_service_pb2_grpc as jobs_grpc
from mlx_responses.v1 import responses_pb2 as pb

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class JobsServicer(jobs_grpc.JobsServiceServicer):
    """Creates, watches and cancels jobs; cancels in-flight foreground responses too."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def CreateJob(
        self, request: jobs.CreateJobRequest, context: Context
    ) -> jobs.CreateJobResponse:
        return jobs.CreateJobResponse(response=await self._core.jobs.create(request.params))

    async def WatchJob(
        self, request: jobs.WatchJobRequest, context: Context
    ) -> AsyncIterator[jobs.WatchJobResponse]:
        manager = self._core.jobs
        if not manager.is_local(request.id):
            # Run by another replica (or finished): its final object is what there is to see.
            await manager.wait_ended(request.id, timeout=float("inf"))
        if await manager.status_of(request.id) is None:
            final = await manager.find(request.id)
            if final is None:
                raise not_found("Response", request.id)
            # A finished job: its terminal snapshot is all there is to watch.
            snapshot = ev.ResponseEvent(
                type=TERMINAL_EVENT.get(final.status, ev.EVENT_TYPE_RESPONSE_FAILED),
                snapshot=ev.ResponseSnapshotEvent(response=final),
            )
            yield jobs.WatchJobResponse(events=[snapshot])
            return
        async for events in manager.watch(request.id):
            yield jobs.WatchJobResponse(events=events)

    async def StreamJobEvents(
        self, request: jobs.StreamJobEventsRequest, context: Context
    ) -> AsyncIterator[jobs.StreamJobEventsResponse]:
        if not self._core.responses.enabled:
            raise store_disabled("Response storage")
        replay = JobReplay(self._core.jobs, self._core.events)
        after = request.starting_after if request.HasField("starting_after") else None
        async for events in replay.stream(request.id, after):
            yield jobs.StreamJobEventsResponse(events=events)

    async def CancelResponse(
        self, request: jobs.CancelResponseRequest, context: Context
    ) -> jobs.CancelResponseResponse:
        if not self._core.responses.enabled:
            raise store_disabled("Response storage")
        final = await self._core.jobs.cancel(request.id)
        if final is None:
            final = await self._core.pipeline.in_flight.cancel(request.id)
        if final is None:
            final = await self._core.jobs.foreground.cancel_elsewhere(request.id)
        if final is not None:
            return jobs.CancelResponseResponse(response=final)
        # Nothing runs it: a stored response is cancelled already or cannot be; a kept one
        # (store: false) answers as it ended.
        stored = await self._core.responses.get(request.id)
        kept = await self._core.jobs.find(request.id) if stored is None else None
        if kept is not None:
            return jobs.CancelResponseResponse(response=kept)
        if stored is None:
            raise not_found("Response", request.id)
        if stored.response.status == pb.RESPONSE_STATUS_CANCELLED:
            return jobs.CancelResponseResponse(response=stored.response)
        raise invalid(
            f"Cannot cancel a response with status '{status_name(stored.response.status)}'.",
            "response_id",
        )
