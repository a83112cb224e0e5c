"""EmbeddingsService: `POST /v1/embeddings`, served by the pool's embedding models."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from mlx_responses.service.core import Core
from mlx_responses.service.models.embedding_runtime import EmbeddingRuntime

from mlx_responses.v1 import embeddings_service_pb2 as em
from mlx_responses.v1 import embeddings_service_pb2_grpc as em_grpc

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class EmbeddingsServicer(em_grpc.EmbeddingsServiceServicer):
    """Holds the named embedding model for the request (loading it first if it is not)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def CreateEmbeddings(
        self, request: em.CreateEmbeddingsRequest, context: Context
    ) -> em.CreateEmbeddingsResponse:
        keep = request.keep_alive_seconds if request.HasField("keep_alive_seconds") else None
        lease = await self._core.models.acquire(request.model, keep, embeds=True)
        try:
            runtime = lease.runtime
            assert isinstance(runtime, EmbeddingRuntime)  # acquire(embeds=True) holds it
            return await runtime.embed(request)
        finally:
            lease.release()
