"""GenerationService: create, stream, count input tokens, list models."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc

from mlx_responses.v1 import generation_service_pb2 as gen
from mlx_responses.v1 import generation_service_pb2_grpc as gen_grpc
from service.core import Core

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class GenerationServicer(gen_grpc.GenerationServiceServicer):
    """Delegates to the core's ResponseGenerator."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def CreateResponse(
        self, request: gen.CreateResponseRequest, context: Context
    ) -> gen.CreateResponseResponse:
        generator = self._core.generator
        response_id = generator.ids("resp")
        # Claimed while it runs, so a cancel asked of another replica reaches it.
        async with self._core.jobs.foreground.running(response_id):
            response = await generator.create(request.params, response_id)
        return gen.CreateResponseResponse(response=response)

    async def StreamResponse(
        self, request: gen.StreamResponseRequest, context: Context
    ) -> AsyncIterator[gen.StreamResponseResponse]:
        generator = self._core.generator
        response_id = generator.ids("resp")
        async with self._core.jobs.foreground.running(response_id):
            turn = await generator.prepare(request.params, response_id)
            async for events in generator.stream(turn):
                yield gen.StreamResponseResponse(events=events)

    async def CountInputTokens(
        self, request: gen.CountInputTokensRequest, context: Context
    ) -> gen.CountInputTokensResponse:
        count = await self._core.generator.count_input_tokens(request.params)
        return gen.CountInputTokensResponse(input_tokens=count)

    async def ListModels(
        self, request: gen.ListModelsRequest, context: Context
    ) -> gen.ListModelsResponse:
        loaded = self._core.generator.loaded
        model = gen.Model(
            id=loaded.alias,
            created=loaded.created,
            owned_by="mlx-responses",
            path=str(loaded.path),
            context_length=loaded.context_length,
        )
        return gen.ListModelsResponse(models=[model])
