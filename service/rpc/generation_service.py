"""GenerationService: create, stream, count input tokens, list models."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc
from mlx_responses.service.core import Core
from mlx_responses.service.ids import new_id
from mlx_responses.service.models.pool import ServedModel
from mlx_responses.service.responses.compaction_trigger import compaction_events, is_trigger

from mlx_responses.v1 import generation_service_pb2 as gen
from mlx_responses.v1 import generation_service_pb2_grpc as gen_grpc

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class GenerationServicer(gen_grpc.GenerationServiceServicer):
    """Runs the request on the core's pipeline, with the model the request names."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def CreateResponse(
        self, request: gen.CreateResponseRequest, context: Context
    ) -> gen.CreateResponseResponse:
        claims = self._core.jobs.foreground
        pipeline = self._core.pipeline
        async with self._core.models.use(request.params) as runtime:
            response_id = new_id("resp")
            # Claimed while it runs, so a cancel asked of another replica reaches it.
            async with claims.running(response_id):
                if is_trigger(request.params):  # Codex's remote compaction v2
                    trigger = await compaction_events(
                        pipeline, runtime, request.params, response_id
                    )
                    response = trigger[-1].snapshot.response
                else:
                    response = await pipeline.create(runtime, request.params, response_id)
        return gen.CreateResponseResponse(response=response)

    async def StreamResponse(
        self, request: gen.StreamResponseRequest, context: Context
    ) -> AsyncIterator[gen.StreamResponseResponse]:
        claims = self._core.jobs.foreground
        pipeline = self._core.pipeline
        async with self._core.models.use(request.params) as runtime:
            response_id = new_id("resp")
            async with claims.running(response_id):
                if is_trigger(request.params):  # Codex's remote compaction v2
                    events = await compaction_events(pipeline, runtime, request.params, response_id)
                    yield gen.StreamResponseResponse(events=events)
                    return
                turn = await pipeline.prepare(runtime, request.params, response_id)
                async for events in pipeline.stream(turn):
                    yield gen.StreamResponseResponse(events=events)

    async def CountInputTokens(
        self, request: gen.CountInputTokensRequest, context: Context
    ) -> gen.CountInputTokensResponse:
        async with self._core.models.use(request.params) as runtime:
            count = await self._core.pipeline.count_input_tokens(runtime, request.params)
        return gen.CountInputTokensResponse(input_tokens=count)

    async def ListModels(
        self, request: gen.ListModelsRequest, context: Context
    ) -> gen.ListModelsResponse:
        self._core.require_ready()
        self._core.models.rescan()  # a --model-dir folder added since
        return gen.ListModelsResponse(
            models=[model_proto(m) for m in self._core.models.models.values()]
        )

    async def LoadModel(
        self, request: gen.LoadModelRequest, context: Context
    ) -> gen.LoadModelResponse:
        self._core.require_ready()
        keep_alive = request.keep_alive_seconds if request.HasField("keep_alive_seconds") else None
        model = await self._core.models.load(request.model, keep_alive)
        return gen.LoadModelResponse(model=model_proto(model))

    async def UnloadModel(
        self, request: gen.UnloadModelRequest, context: Context
    ) -> gen.UnloadModelResponse:
        self._core.require_ready()
        model = await self._core.models.unload(request.model)
        return gen.UnloadModelResponse(model=model_proto(model))


def model_proto(m: ServedModel) -> gen.Model:
    """A served model as ListModels (and LoadModel, UnloadModel) answer it."""
    model = gen.Model(
        id=m.id,
        created=m.created,
        owned_by="mlx-responses",
        path=str(m.source.folder),
        context_length=m.context_length,
        loaded=m.runtime is not None,
        memory_bytes=m.memory_bytes,
        pinned=m.pinned,
    )
    if m.expires_at is not None:
        model.expires_at = int(m.expires_at)
    if m.failure is not None:  # unloaded after its engine failed
        model.failure.message = m.failure.message
        model.failure.reload_after = math.ceil(m.failure.reload_after)
    return model
