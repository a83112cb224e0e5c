"""StorageService: stored responses and conversation transcripts."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from mlx_responses.service.core import Core
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.responses.history import store_disabled
from mlx_responses.service.stores.base import ConversationStore, Occupancy

from mlx_responses.v1 import storage_service_pb2 as st
from mlx_responses.v1 import storage_service_pb2_grpc as st_grpc

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


def _stats(o: Occupancy) -> st.StoreStats:
    return st.StoreStats(
        entries=o.entries,
        bytes=o.bytes,
        max_entries=o.max_entries,
        max_bytes=o.max_bytes,
        evictions=o.evictions,
    )


def not_found(what: str, ident: str) -> ServiceError:
    """404 for an unknown, evicted or expired id."""
    return ServiceError(Reason.NOT_FOUND, f"{what} with id '{ident}' not found.", param="id")


class StorageServicer(st_grpc.StorageServiceServicer):
    """Reads the core's stores."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def _responses_enabled(self) -> None:
        if not self._core.responses.enabled:
            raise store_disabled("Response storage")

    async def GetResponse(
        self, request: st.GetResponseRequest, context: Context
    ) -> st.GetResponseResponse:
        self._responses_enabled()
        jobs = self._core.jobs_if_ready
        kept = await jobs.get(request.id) if jobs is not None else None
        if kept is not None:
            return st.GetResponseResponse(response=kept)
        stored = await self._core.responses.get(request.id)
        if stored is None:
            raise not_found("Response", request.id)
        return st.GetResponseResponse(response=stored.response)

    async def DeleteResponse(
        self, request: st.DeleteResponseRequest, context: Context
    ) -> st.DeleteResponseResponse:
        self._responses_enabled()
        jobs = self._core.jobs_if_ready
        if jobs is not None:
            await jobs.refuse_delete(request.id)
        forgotten = await jobs.forget(request.id) if jobs is not None else False
        if not await self._core.responses.delete(request.id) and not forgotten:
            raise not_found("Response", request.id)
        return st.DeleteResponseResponse(id=request.id, deleted=True)

    def _conversations(self) -> ConversationStore:
        conversations = self._core.conversations
        if not conversations.enabled:
            raise store_disabled("The conversation store", "conversation")
        return conversations

    async def GetConversation(
        self, request: st.GetConversationRequest, context: Context
    ) -> st.GetConversationResponse:
        conversations = self._conversations()
        if not await conversations.exists(request.id):
            raise not_found("Conversation", request.id)
        items = await conversations.items(request.id)
        return st.GetConversationResponse(id=request.id, items=items)

    async def DeleteConversation(
        self, request: st.DeleteConversationRequest, context: Context
    ) -> st.DeleteConversationResponse:
        if not await self._conversations().delete(request.id):
            raise not_found("Conversation", request.id)
        return st.DeleteConversationResponse(id=request.id, deleted=True)

    async def GetStoreStats(
        self, request: st.GetStoreStatsRequest, context: Context
    ) -> st.GetStoreStatsResponse:
        return st.GetStoreStatsResponse(
            responses=_stats(await self._core.responses.occupancy()),
            conversations=_stats(await self._core.conversations.occupancy()),
        )
