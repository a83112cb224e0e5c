"""CompactionService: `POST /v1/responses/compact`, served by the core's one compaction code."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from mlx_responses.service.core import Core

from mlx_responses.v1 import compaction_service_pb2 as cp
from mlx_responses.v1 import compaction_service_pb2_grpc as cp_grpc

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class CompactionServicer(cp_grpc.CompactionServiceServicer):
    """Compacts on the core's pipeline (the code automatic compaction runs too)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def CompactResponse(
        self, request: cp.CompactResponseRequest, context: Context
    ) -> cp.CompactResponseResponse:
        keep = request.keep_tokens if request.HasField("keep_tokens") else None
        async with self._core.models.use(request.params) as runtime:
            return await self._core.pipeline.compact(runtime, request.params, keep)
