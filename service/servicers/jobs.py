"""JobsService: background jobs and cancellation of in-flight responses."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc

from mlx_responses.v1 import jobs_service_pb2 as jobs
from mlx_responses.v1 import jobs_service_pb2_grpc as jobs_grpc
from mlx_responses.v1 import responses_pb2 as pb
from service.core import Core
from service.errors import invalid
from service.history import status_name, store_disabled
from service.servicers.storage import not_found

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class JobsServicer(jobs_grpc.JobsServiceServicer):
    """Creates and cancels jobs. WatchJob answers UNIMPLEMENTED (base class): poll GetResponse."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def CreateJob(
        self, request: jobs.CreateJobRequest, context: Context
    ) -> jobs.CreateJobResponse:
        return jobs.CreateJobResponse(response=await self._core.jobs.create(request.params))

    async def CancelResponse(
        self, request: jobs.CancelResponseRequest, context: Context
    ) -> jobs.CancelResponseResponse:
        if not self._core.responses.enabled:
            raise store_disabled("Response storage")
        final = await self._core.jobs.cancel(request.id)
        if final is None:
            final = await self._core.generator.cancel(request.id)
        if final is not None:
            return jobs.CancelResponseResponse(response=final)
        stored = await self._core.responses.get(request.id)
        kept = self._core.jobs.get(request.id)
        if stored is None and kept is not None:
            return jobs.CancelResponseResponse(response=kept)
        if stored is None:
            raise not_found("Response", request.id)
        if stored.response.status == pb.RESPONSE_STATUS_CANCELLED:
            return jobs.CancelResponseResponse(response=stored.response)
        raise invalid(
            f"Cannot cancel a response with status '{status_name(stored.response.status)}'.",
            "response_id",
        )
