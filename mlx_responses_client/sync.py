"""The blocking client (grpc): the same methods as AsyncClient, for scripts and threads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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


class EventStream:
    """A streaming call's event batches, iterated; `cancel()` stops the generation."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> Iterator[Events]:
        for message in self._call:
            yield list(message.events)

    def cancel(self) -> None:
        self._call.cancel()


class Client:
    """Everything the core serves, over one blocking grpc channel."""

    def __init__(self, channel: grpc.Channel) -> None:
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
        interceptors: Sequence[grpc.UnaryUnaryClientInterceptor] = (),
        options: Sequence[tuple[str, Any]] = CHANNEL_OPTIONS,
        root_certificates: bytes | None = None,
    ) -> Client:
        """A client on a fresh insecure channel to `address` (host:port).

        `options` replace CHANNEL_OPTIONS (64 MiB messages) when given; TLS when
        `root_certificates` (PEM) are given.
        """
        if root_certificates is None:
            channel = grpc.insecure_channel(address, options=list(options))
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            channel = grpc.secure_channel(address, credentials, options=list(options))
        if interceptors:
            channel = grpc.intercept_channel(channel, *interceptors)
        return cls(channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def serving(self, timeout: float = 5) -> bool:
        """Whether the core's health service reports SERVING (False when unreachable)."""
        try:
            reply = self._health.Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.RpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    def create(
        self,
        params: responses_pb2.CreateResponseParams,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> responses_pb2.Response:
        """A whole response (generation is not bounded by a deadline unless given)."""
        request = generation_service_pb2.CreateResponseRequest(params=params)
        return self._generation.CreateResponse(request, metadata=metadata, timeout=timeout).response

    def stream(
        self, params: responses_pb2.CreateResponseParams, *, metadata: Metadata | None = None
    ) -> EventStream:
        """The response's events as they are generated; refusals raise on iteration."""
        request = generation_service_pb2.StreamResponseRequest(params=params)
        return EventStream(self._generation.StreamResponse(request, metadata=metadata))

    def count_input_tokens(
        self,
        params: responses_pb2.CreateResponseParams,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> int:
        request = generation_service_pb2.CountInputTokensRequest(params=params)
        reply = self._generation.CountInputTokens(request, metadata=metadata, timeout=timeout)
        return int(reply.input_tokens)

    def list_models(
        self, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> list[generation_service_pb2.Model]:
        request = generation_service_pb2.ListModelsRequest()
        return list(self._generation.ListModels(request, metadata=metadata, timeout=timeout).models)

    def load_model(
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
        return self._generation.LoadModel(request, metadata=metadata, timeout=timeout).model

    def unload_model(
        self, model: str, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> generation_service_pb2.Model:
        """Unloads `model` now (FAILED_PRECONDITION, `model_busy`, while it is in use)."""
        request = generation_service_pb2.UnloadModelRequest(model=model)
        return self._generation.UnloadModel(request, metadata=metadata, timeout=timeout).model

    def get_response(
        self, response_id: str, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> responses_pb2.Response:
        request = storage_service_pb2.GetResponseRequest(id=response_id)
        return self._storage.GetResponse(request, metadata=metadata, timeout=timeout).response

    def delete_response(
        self, response_id: str, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> storage_service_pb2.DeleteResponseResponse:
        request = storage_service_pb2.DeleteResponseRequest(id=response_id)
        return self._storage.DeleteResponse(request, metadata=metadata, timeout=timeout)

    def cancel(
        self, response_id: str, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> responses_pb2.Response:
        """Cancels an in-flight response or background job; returns its final object."""
        request = jobs_service_pb2.CancelResponseRequest(id=response_id)
        return self._jobs.CancelResponse(request, metadata=metadata, timeout=timeout).response

    def create_job(
        self,
        params: responses_pb2.CreateResponseParams,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> responses_pb2.Response:
        """Starts a background response; returns it queued."""
        request = jobs_service_pb2.CreateJobRequest(params=params)
        return self._jobs.CreateJob(request, metadata=metadata, timeout=timeout).response

    def watch_job(self, response_id: str, *, metadata: Metadata | None = None) -> EventStream:
        """A job's events from now until it is terminal."""
        request = jobs_service_pb2.WatchJobRequest(id=response_id)
        return EventStream(self._jobs.WatchJob(request, metadata=metadata))

    def stream_job_events(
        self,
        response_id: str,
        starting_after: int | None = None,
        *,
        metadata: Metadata | None = None,
    ) -> EventStream:
        """A background response's events after `starting_after` (all without it), then live."""
        request = jobs_service_pb2.StreamJobEventsRequest(id=response_id)
        if starting_after is not None:
            request.starting_after = starting_after
        return EventStream(self._jobs.StreamJobEvents(request, metadata=metadata))

    def list_input_items(
        self,
        response_id: str,
        page: storage_service_pb2.ItemPageQuery,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ItemPage:
        """A page of a stored response's input items."""
        request = storage_service_pb2.ListInputItemsRequest(id=response_id, page=page)
        return self._storage.ListInputItems(request, metadata=metadata, timeout=timeout).page

    def create_conversation(
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
        reply = self._storage.CreateConversation(request, metadata=metadata, timeout=timeout)
        return reply.conversation

    def retrieve_conversation(
        self,
        conversation_id: str,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ConversationObject:
        request = storage_service_pb2.RetrieveConversationRequest(id=conversation_id)
        reply = self._storage.RetrieveConversation(request, metadata=metadata, timeout=timeout)
        return reply.conversation

    def update_conversation(
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
        reply = self._storage.UpdateConversation(request, metadata=metadata, timeout=timeout)
        return reply.conversation

    def delete_conversation(
        self,
        conversation_id: str,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.DeleteConversationResponse:
        request = storage_service_pb2.DeleteConversationRequest(id=conversation_id)
        return self._storage.DeleteConversation(request, metadata=metadata, timeout=timeout)

    def list_conversation_items(
        self,
        conversation_id: str,
        page: storage_service_pb2.ItemPageQuery,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> storage_service_pb2.ItemPage:
        request = storage_service_pb2.ListConversationItemsRequest(id=conversation_id, page=page)
        reply = self._storage.ListConversationItems(request, metadata=metadata, timeout=timeout)
        return reply.page

    def add_conversation_items(
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
        reply = self._storage.AddConversationItems(request, metadata=metadata, timeout=timeout)
        return reply.page

    def get_conversation_item(
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
        return self._storage.GetConversationItem(request, metadata=metadata, timeout=timeout).item

    def delete_conversation_item(
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
        reply = self._storage.DeleteConversationItem(request, metadata=metadata, timeout=timeout)
        return reply.conversation

    def compact(
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
        return self._compaction.CompactResponse(request, metadata=metadata, timeout=timeout)

    def embed(
        self,
        request: embeddings_service_pb2.CreateEmbeddingsRequest,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> embeddings_service_pb2.CreateEmbeddingsResponse:
        return self._embeddings.CreateEmbeddings(request, metadata=metadata, timeout=timeout)
