"""Typed wrapper over the core's gRPC stubs: one channel, deadlines, errors as OpenAIError."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from http_facade.auth import forwarding_interceptors
from http_facade.errors import from_rpc_error
from http_facade.request_id import request_id_interceptors
from mlx_responses.v1 import (
    compaction_service_pb2,
    compaction_service_pb2_grpc,
    events_pb2,
    generation_service_pb2,
    generation_service_pb2_grpc,
    jobs_service_pb2,
    jobs_service_pb2_grpc,
    responses_pb2,
    storage_service_pb2,
    storage_service_pb2_grpc,
)

T = TypeVar("T")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Trailers the façade accepts: the core bounds an error to a few kB (service/errors.py), so
# 32 kB (soft) / 64 kB (hard) leaves headroom without letting a core flood the façade.
MAX_METADATA_BYTES = 32 * 1024
ABSOLUTE_MAX_METADATA_BYTES = 64 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_metadata_size", MAX_METADATA_BYTES),
    ("grpc.absolute_max_metadata_size", ABSOLUTE_MAX_METADATA_BYTES),
]
# Short calls get a deadline; generation is bounded by the model, not by a clock.
SHORT_DEADLINE_S = 30.0


async def _call(awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error) from error


class EventStream:
    """A StreamResponse call: the first batch is awaited before the HTTP stream opens."""

    def __init__(self, call: grpc.aio.UnaryStreamCall) -> None:  # type: ignore[type-arg]
        self._call = call

    async def first(self) -> list[events_pb2.ResponseEvent]:
        """The first batch; core refusals surface here as OpenAIError."""
        try:
            message = await self._call.read()
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from error
        if message is grpc.aio.EOF:
            return []
        return list(message.events)

    async def rest(self) -> AsyncIterator[list[events_pb2.ResponseEvent]]:
        """The remaining batches; a broken core raises OpenAIError."""
        while True:
            try:
                message = await self._call.read()
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error) from error
            if message is grpc.aio.EOF:
                return
            yield list(message.events)

    def cancel(self) -> None:
        """Cancels the RPC: the core frees the engine slot."""
        self._call.cancel()


class CoreClient:
    """Everything the façade asks of the core."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self._generation = generation_service_pb2_grpc.GenerationServiceStub(channel)
        self._storage = storage_service_pb2_grpc.StorageServiceStub(channel)
        self._jobs = jobs_service_pb2_grpc.JobsServiceStub(channel)
        self._compaction = compaction_service_pb2_grpc.CompactionServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)

    @classmethod
    def connect(
        cls,
        address: str,
        root_certificates: bytes | None = None,
        options: Sequence[tuple[str, Any]] = CHANNEL_OPTIONS,
    ) -> CoreClient:
        """A client on a fresh channel to `address` (host:port, or unix:PATH).

        TLS when `root_certificates` (PEM) are given; each call carries the caller's API key
        and the HTTP request's id.
        """
        interceptors = [*forwarding_interceptors(), *request_id_interceptors()]
        if root_certificates is None:
            channel = grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            channel = grpc.aio.secure_channel(
                address, credentials, options=options, interceptors=interceptors
            )
        return cls(channel)

    async def close(self) -> None:
        await self.channel.close()

    async def serving(self) -> bool:
        """Whether the core's health service reports SERVING."""
        try:
            reply = await self._health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        except grpc.aio.AioRpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    async def create(self, params: responses_pb2.CreateResponseParams) -> responses_pb2.Response:
        reply = await _call(
            self._generation.CreateResponse(
                generation_service_pb2.CreateResponseRequest(params=params)
            )
        )
        return reply.response

    def stream(self, params: responses_pb2.CreateResponseParams) -> EventStream:
        call = self._generation.StreamResponse(
            generation_service_pb2.StreamResponseRequest(params=params)
        )
        return EventStream(call)

    async def count_input_tokens(self, params: responses_pb2.CreateResponseParams) -> int:
        reply = await _call(
            self._generation.CountInputTokens(
                generation_service_pb2.CountInputTokensRequest(params=params),
                timeout=SHORT_DEADLINE_S,
            )
        )
        return reply.input_tokens

    async def list_models(self) -> list[generation_service_pb2.Model]:
        reply = await _call(
            self._generation.ListModels(
                generation_service_pb2.ListModelsRequest(), timeout=SHORT_DEADLINE_S
            )
        )
        return list(reply.models)

    async def get_response(self, response_id: str) -> responses_pb2.Response:
        reply = await _call(
            self._storage.GetResponse(
                storage_service_pb2.GetResponseRequest(id=response_id), timeout=SHORT_DEADLINE_S
            )
        )
        return reply.response

    async def delete_response(self, response_id: str) -> storage_service_pb2.DeleteResponseResponse:
        return await _call(
            self._storage.DeleteResponse(
                storage_service_pb2.DeleteResponseRequest(id=response_id),
                timeout=SHORT_DEADLINE_S,
            )
        )

    async def cancel(self, response_id: str) -> responses_pb2.Response:
        reply = await _call(
            self._jobs.CancelResponse(
                jobs_service_pb2.CancelResponseRequest(id=response_id), timeout=SHORT_DEADLINE_S
            )
        )
        return reply.response

    async def create_job(
        self, params: responses_pb2.CreateResponseParams
    ) -> responses_pb2.Response:
        reply = await _call(
            self._jobs.CreateJob(
                jobs_service_pb2.CreateJobRequest(params=params), timeout=SHORT_DEADLINE_S
            )
        )
        return reply.response

    async def compact(
        self, params: responses_pb2.CreateResponseParams, keep_tokens: int | None
    ) -> compaction_service_pb2.CompactResponseResponse:
        request = compaction_service_pb2.CompactResponseRequest(params=params)
        if keep_tokens is not None:
            request.keep_tokens = keep_tokens
        return await _call(self._compaction.CompactResponse(request))
