"""The asyncio client (grpc.aio): one method per RPC, protos in and out, gRPC errors as raised."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mlx_responses.v1 import (
    compaction_service_pb2,
    compaction_service_pb2_grpc,
    embeddings_service_pb2,
    embeddings_service_pb2_grpc,
    events_pb2,
    generation_service_pb2,
    generation_service_pb2_grpc,
    jobs_service_pb2,
    jobs_service_pb2_grpc,
    responses_pb2,
    storage_service_pb2,
    storage_service_pb2_grpc,
)
from mlx_responses_client.common import CHANNEL_OPTIONS, Metadata

Events = list[events_pb2.ResponseEvent]


class AsyncEventStream:
    """A streaming call's event batches; `first()` surfaces refusals before anything streams."""

    def __init__(self, call: Any) -> None:
        self._call = call

    async def first(self) -> Events:
        """The first batch ([] if the stream ended at once); refusals raise AioRpcError here."""
        message = await self._call.read()
        return [] if message is grpc.aio.EOF else list(message.events)

    async def rest(self) -> AsyncIterator[Events]:
        """The batches after the first."""
        while (message := await self._call.read()) is not grpc.aio.EOF:
            yield list(message.events)

    async def __aiter__(self) -> AsyncIterator[Events]:
        if first := await self.first():
            yield first
        async for batch in self.rest():
            yield batch

    def cancel(self) -> None:
        """Cancels the RPC: the core frees the engine slot."""
        self._call.cancel()


class AsyncClient:
    """Everything the core serves, over one grpc.aio channel."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self._generation = generation_service_pb2_grpc.GenerationServiceStub(channel)
        self._storage = storage_service_pb2_grpc.StorageServiceStub(channel)
        self._jobs = jobs_service_pb2_grpc.JobsServiceStub(channel)
        self._compaction = compaction_service_pb2_grpc.CompactionServiceStub(channel)
        self._embeddings = embeddings_service_pb2_grpc.EmbeddingsServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)

    @classmethod
    def connect(
        cls,
        address: str,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
        options: Sequence[tuple[str, Any]] = CHANNEL_OPTIONS,
        root_certificates: bytes | None = None,
    ) -> AsyncClient:
        """A client on a fresh insecure channel to `address` (host:port).

        `options` replace CHANNEL_OPTIONS (64 MiB messages) when given; TLS when
        `root_certificates` (PEM) are given.
        """
        chained = list(interceptors) or None
        if root_certificates is None:
            channel = grpc.aio.insecure_channel(
                address, options=list(options), interceptors=chained
            )
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            channel = grpc.aio.secure_channel(
                address, credentials, options=list(options), interceptors=chained
            )
        return cls(channel)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def serving(self, timeout: float = 5) -> bool:
        """Whether the core's health service reports SERVING (False when unreachable)."""
        try:
            reply = await self._health.Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.aio.AioRpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    async def create(
        self,
        params: responses_pb2.CreateResponseParams,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> responses_pb2.Response:
        """A whole response (generation is not bounded by a deadline unless given)."""
        request = generation_service_pb2.CreateResponseRequest(params=params)
        reply = await self._generation.CreateResponse(request, metadata=metadata, timeout=timeout)
        return reply.response

    def stream(
        self, params: responses_pb2.CreateResponseParams, *, metadata: Metadata | None = None
    ) -> AsyncEventStream:
        """The response's events as they are generated."""
        request = generation_service_pb2.StreamResponseRequest(params=params)
        return AsyncEventStream(self._generation.StreamResponse(request, metadata=metadata))

    async def count_input_tokens(
        self,
        params: responses_pb2.CreateResponseParams,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> int:
        request = generation_service_pb2.CountInputTokensRequest(params=params)
        reply = await self._generation.CountInputTokens(request, metadata=metadata, timeout=timeout)
        return int(reply.input_tokens)

    async def list_models(
        self, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> list[generation_service_pb2.Model]:
        request = generation_service_pb2.ListModelsRequest()
        reply = await self._generation.ListModels(request, metadata=metadata, timeout=timeout)
        return list(reply.models)

    async def load_model(
        self,
        model: str,
        *,
        keep_alive_seconds: float | None = None,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> generation_service_pb2.Model:
        """Loads `model` now and restarts its keep-alive (negative seconds: for good)."""
        request = generation_service_pb2.LoadModelRequest(model=model)
        if keep_alive_seconds is not None:
            request.keep_alive_seconds = keep_alive_seconds
        reply = await self._generation.LoadModel(request, metadata=metadata, timeout=timeout)
        return reply.model

    async def unload_model(
        self, model: str, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> generation_service_pb2.Model:
        """Unloads `model` now (FAILED_PRECONDITION, `model_busy`, while it is in use)."""
        request = generation_service_pb2.UnloadModelRequest(model=model)
        reply = await self._generation.UnloadModel(request, metadata=metadata, timeout=timeout)
        return reply.model

    async def get_response(
        self, response_id: str, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> responses_pb2.Response:
        request = storage_service_pb2.GetResponseRequest(id=response_id)
        reply = await self._storage.GetResponse(request, metadata=metadata, timeout=timeout)
        return reply.response

    async def delete_response(
        self, response_id: str, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> storage_service_pb2.DeleteResponseResponse:
        request = storage_service_pb2.DeleteResponseRequest(id=response_id)
        return await self._storage.DeleteResponse(request, metadata=metadata, timeout=timeout)

    async def cancel(
        self, response_id: str, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> responses_pb2.Response:
        """Cancels an in-flight response or background job; returns its final object."""
        request = jobs_service_pb2.CancelResponseRequest(id=response_id)
        reply = await self._jobs.CancelResponse(request, metadata=metadata, timeout=timeout)
        return reply.response

    async def create_job(
        self,
        params: responses_pb2.CreateResponseParams,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> responses_pb2.Response:
        """Starts a background response; returns it queued."""
        request = jobs_service_pb2.CreateJobRequest(params=params)
        reply = await self._jobs.CreateJob(request, metadata=metadata, timeout=timeout)
        return reply.response

    async def watch_job(
        self, response_id: str, *, metadata: Metadata | None = None
    ) -> AsyncIterator[Events]:
        """A job's events from now until it is terminal."""
        request = jobs_service_pb2.WatchJobRequest(id=response_id)
        async for message in self._jobs.WatchJob(request, metadata=metadata):
            yield list(message.events)

    def stream_job_events(
        self,
        response_id: str,
        starting_after: int | None = None,
        *,
        metadata: Metadata | None = None,
    ) -> AsyncEventStream:
        """A background response's events after `starting_after` (all without it), then live."""
        request = jobs_service_pb2.StreamJobEventsRequest(id=response_id)
        if starting_after is not None:
            request.starting_after = starting_after
        return AsyncEventStream(self._jobs.StreamJobEvents(request, metadata=metadata))

    async def list_input_items(
        self,
        response_id: str,
        page: storage_service_pb2.ItemPageQuery,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ItemPage:
        """A page of a stored response's input items."""
        request = storage_service_pb2.ListInputItemsRequest(id=response_id, page=page)
        reply = await self._storage.ListInputItems(request, metadata=metadata, timeout=timeout)
        return reply.page

    async def create_conversation(
        self,
        items: Sequence[responses_pb2.Item],
        conversation_metadata: dict[str, str],
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ConversationObject:
        """A new `conv_...` conversation holding `items`."""
        request = storage_service_pb2.CreateConversationRequest(
            items=items, metadata=conversation_metadata
        )
        reply = await self._storage.CreateConversation(request, metadata=metadata, timeout=timeout)
        return reply.conversation

    async def retrieve_conversation(
        self,
        conversation_id: str,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ConversationObject:
        request = storage_service_pb2.RetrieveConversationRequest(id=conversation_id)
        reply = await self._storage.RetrieveConversation(
            request, metadata=metadata, timeout=timeout
        )
        return reply.conversation

    async def update_conversation(
        self,
        conversation_id: str,
        conversation_metadata: dict[str, str],
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ConversationObject:
        request = storage_service_pb2.UpdateConversationRequest(
            id=conversation_id, metadata=conversation_metadata
        )
        reply = await self._storage.UpdateConversation(request, metadata=metadata, timeout=timeout)
        return reply.conversation

    async def delete_conversation(
        self,
        conversation_id: str,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.DeleteConversationResponse:
        request = storage_service_pb2.DeleteConversationRequest(id=conversation_id)
        return await self._storage.DeleteConversation(request, metadata=metadata, timeout=timeout)

    async def list_conversation_items(
        self,
        conversation_id: str,
        page: storage_service_pb2.ItemPageQuery,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ItemPage:
        request = storage_service_pb2.ListConversationItemsRequest(id=conversation_id, page=page)
        reply = await self._storage.ListConversationItems(
            request, metadata=metadata, timeout=timeout
        )
        return reply.page

    async def add_conversation_items(
        self,
        conversation_id: str,
        items: Sequence[responses_pb2.Item],
        include: Sequence[str] = (),
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ItemPage:
        request = storage_service_pb2.AddConversationItemsRequest(
            id=conversation_id, items=items, include=include
        )
        reply = await self._storage.AddConversationItems(
            request, metadata=metadata, timeout=timeout
        )
        return reply.page

    async def get_conversation_item(
        self,
        conversation_id: str,
        item_id: str,
        include: Sequence[str] = (),
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> responses_pb2.Item:
        request = storage_service_pb2.GetConversationItemRequest(
            conversation_id=conversation_id, item_id=item_id, include=include
        )
        reply = await self._storage.GetConversationItem(request, metadata=metadata, timeout=timeout)
        return reply.item

    async def delete_conversation_item(
        self,
        conversation_id: str,
        item_id: str,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ConversationObject:
        request = storage_service_pb2.DeleteConversationItemRequest(
            conversation_id=conversation_id, item_id=item_id
        )
        reply = await self._storage.DeleteConversationItem(
            request, metadata=metadata, timeout=timeout
        )
        return reply.conversation

    async def compact(
        self,
        params: responses_pb2.CreateResponseParams,
        keep_tokens: int | None = None,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> compaction_service_pb2.CompactResponseResponse:
        request = compaction_service_pb2.CompactResponseRequest(params=params)
        if keep_tokens is not None:
            request.keep_tokens = keep_tokens
        return await self._compaction.CompactResponse(request, metadata=metadata, timeout=timeout)

    async def embed(
        self,
        request: embeddings_service_pb2.CreateEmbeddingsRequest,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> embeddings_service_pb2.CreateEmbeddingsResponse:
        return await self._embeddings.CreateEmbeddings(request, metadata=metadata, timeout=timeout)
