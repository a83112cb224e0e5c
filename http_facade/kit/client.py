"""The façade's view of the core: the typed client, short deadlines, errors as OpenAIError."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, TypeVar

import grpc
from mlx_responses.http_facade.kit.auth import forwarding_interceptors
from mlx_responses.http_facade.kit.errors import from_rpc_error
from mlx_responses.http_facade.kit.request_id import request_id_interceptors
from mlx_responses.service.fan_out import METADATA_KEY as FAN_OUT_KEY

from mlx_responses.v1 import (
    compaction_service_pb2,
    embeddings_service_pb2,
    events_pb2,
    generation_service_pb2,
    responses_pb2,
    storage_service_pb2,
)
from mlx_responses_client import CHANNEL_OPTIONS as CLIENT_CHANNEL_OPTIONS
from mlx_responses_client import AsyncClient, AsyncEventStream

T = TypeVar("T")

# Short calls get a deadline; generation is bounded by the model, not by a clock.
SHORT_DEADLINE_S = 30.0
# Trailers the façade accepts: the core bounds an error to a few kB (service/errors.py), so
# 32 kB (soft) / 64 kB (hard) leaves headroom without letting a core flood the façade.
MAX_METADATA_BYTES = 32 * 1024
ABSOLUTE_MAX_METADATA_BYTES = 64 * 1024
CHANNEL_OPTIONS = [
    *CLIENT_CHANNEL_OPTIONS,
    ("grpc.max_metadata_size", MAX_METADATA_BYTES),
    ("grpc.absolute_max_metadata_size", ABSOLUTE_MAX_METADATA_BYTES),
]


async def _call(awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error) from error


class CoreEventStream:
    """A StreamResponse call: the first batch is awaited before the HTTP stream opens."""

    def __init__(self, stream: AsyncEventStream) -> None:
        self._stream = stream

    async def first(self) -> list[events_pb2.ResponseEvent]:
        """The first batch; core refusals surface here as OpenAIError."""
        return await _call(self._stream.first())

    async def rest(self) -> AsyncIterator[list[events_pb2.ResponseEvent]]:
        """The remaining batches; a broken core raises OpenAIError."""
        try:
            async for batch in self._stream.rest():
                yield batch
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from error

    def cancel(self) -> None:
        """Cancels the RPC: the core frees the engine slot."""
        self._stream.cancel()


def _fan_out(value: str | None) -> list[tuple[str, str]] | None:
    return None if value is None else [(FAN_OUT_KEY, value)]


class CoreClient:
    """Everything the façade asks of the core."""

    def __init__(self, rpc: AsyncClient) -> None:
        self.rpc = rpc
        self.channel = rpc.channel

    @classmethod
    def connect(
        cls,
        address: str,
        root_certificates: bytes | None = None,
        options: Sequence[tuple[str, Any]] = CHANNEL_OPTIONS,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
    ) -> CoreClient:
        """A client on a fresh channel to `address` (host:port, or unix:PATH).

        TLS when `root_certificates` (PEM) are given; each call carries the caller's API key
        and the HTTP request's id, and passes `interceptors` too.
        """
        interceptors = [*forwarding_interceptors(), *request_id_interceptors(), *interceptors]
        return cls(AsyncClient.connect(address, interceptors, options, root_certificates))

    async def close(self) -> None:
        await self.rpc.close()

    def connected(self) -> bool:
        """Whether the channel is connected now (a call on it does not fail fast)."""
        return self.channel.get_state() == grpc.ChannelConnectivity.READY

    async def serving(self) -> bool:
        """Whether the core's health service reports SERVING."""
        return await self.rpc.serving(timeout=5)

    async def create(
        self, params: responses_pb2.CreateResponseParams, fan_out: str | None = None
    ) -> responses_pb2.Response:
        """`fan_out`: the call's group (service/fan_out.py), for a request's choices."""
        return await _call(self.rpc.create(params, metadata=_fan_out(fan_out)))

    def stream(
        self, params: responses_pb2.CreateResponseParams, fan_out: str | None = None
    ) -> CoreEventStream:
        return CoreEventStream(self.rpc.stream(params, metadata=_fan_out(fan_out)))

    async def count_input_tokens(self, params: responses_pb2.CreateResponseParams) -> int:
        return await _call(self.rpc.count_input_tokens(params, timeout=SHORT_DEADLINE_S))

    async def list_models(self) -> list[generation_service_pb2.Model]:
        return await _call(self.rpc.list_models(timeout=SHORT_DEADLINE_S))

    async def load_model(
        self, model: str, keep_alive_seconds: float | None
    ) -> generation_service_pb2.Model:
        # No deadline: a load takes as long as the weights take to read.
        return await _call(self.rpc.load_model(model, keep_alive_seconds=keep_alive_seconds))

    async def unload_model(self, model: str) -> generation_service_pb2.Model:
        return await _call(self.rpc.unload_model(model))

    async def get_response(self, response_id: str) -> responses_pb2.Response:
        return await _call(self.rpc.get_response(response_id, timeout=SHORT_DEADLINE_S))

    async def delete_response(self, response_id: str) -> storage_service_pb2.DeleteResponseResponse:
        return await _call(self.rpc.delete_response(response_id, timeout=SHORT_DEADLINE_S))

    async def cancel(self, response_id: str) -> responses_pb2.Response:
        return await _call(self.rpc.cancel(response_id, timeout=SHORT_DEADLINE_S))

    async def create_job(
        self, params: responses_pb2.CreateResponseParams
    ) -> responses_pb2.Response:
        return await _call(self.rpc.create_job(params, timeout=SHORT_DEADLINE_S))

    async def compact(
        self, params: responses_pb2.CreateResponseParams, keep_tokens: int | None
    ) -> compaction_service_pb2.CompactResponseResponse:
        return await _call(self.rpc.compact(params, keep_tokens))

    async def embed(
        self, request: embeddings_service_pb2.CreateEmbeddingsRequest
    ) -> embeddings_service_pb2.CreateEmbeddingsResponse:
        # No deadline: the first request loads the model.
        return await _call(self.rpc.embed(request))

    def stream_job_events(self, response_id: str, starting_after: int | None) -> CoreEventStream:
        return CoreEventStream(self.rpc.stream_job_events(response_id, starting_after))

    async def list_input_items(
        self, response_id: str, page: storage_service_pb2.ItemPageQuery
    ) -> storage_service_pb2.ItemPage:
        return await _call(self.rpc.list_input_items(response_id, page, timeout=SHORT_DEADLINE_S))

    async def create_conversation(
        self, items: list[responses_pb2.Item], metadata: dict[str, str]
    ) -> storage_service_pb2.ConversationObject:
        return await _call(self.rpc.create_conversation(items, metadata, timeout=SHORT_DEADLINE_S))

    async def retrieve_conversation(
        self, conversation_id: str
    ) -> storage_service_pb2.ConversationObject:
        reply = self.rpc.retrieve_conversation(conversation_id, timeout=SHORT_DEADLINE_S)
        return await _call(reply)

    async def update_conversation(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> storage_service_pb2.ConversationObject:
        return await _call(
            self.rpc.update_conversation(conversation_id, metadata, timeout=SHORT_DEADLINE_S)
        )

    async def delete_conversation(
        self, conversation_id: str
    ) -> storage_service_pb2.DeleteConversationResponse:
        return await _call(self.rpc.delete_conversation(conversation_id, timeout=SHORT_DEADLINE_S))

    async def list_conversation_items(
        self, conversation_id: str, page: storage_service_pb2.ItemPageQuery
    ) -> storage_service_pb2.ItemPage:
        return await _call(
            self.rpc.list_conversation_items(conversation_id, page, timeout=SHORT_DEADLINE_S)
        )

    async def add_conversation_items(
        self, conversation_id: str, items: list[responses_pb2.Item], include: list[str]
    ) -> storage_service_pb2.ItemPage:
        return await _call(
            self.rpc.add_conversation_items(
                conversation_id, items, include, timeout=SHORT_DEADLINE_S
            )
        )

    async def get_conversation_item(
        self, conversation_id: str, item_id: str, include: list[str]
    ) -> responses_pb2.Item:
        return await _call(
            self.rpc.get_conversation_item(
                conversation_id, item_id, include, timeout=SHORT_DEADLINE_S
            )
        )

    async def delete_conversation_item(
        self, conversation_id: str, item_id: str
    ) -> storage_service_pb2.ConversationObject:
        return await _call(
            self.rpc.delete_conversation_item(conversation_id, item_id, timeout=SHORT_DEADLINE_S)
        )
