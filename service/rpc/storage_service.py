"""StorageService: stored responses and conversation transcripts."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from mlx_responses.service.core import Core
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.responses.conversations import Conversations
from mlx_responses.service.responses.history import store_disabled
from mlx_responses.service.responses.item_pages import page
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
        self._api = Conversations(core.conversations)

    def _responses_enabled(self) -> None:
        if not self._core.responses.enabled:
            raise store_disabled("Response storage")

    async def GetResponse(
        self, request: st.GetResponseRequest, context: Context
    ) -> st.GetResponseResponse:
        self._responses_enabled()
        jobs = self._core.jobs_if_ready
        if jobs is not None:
            found = await jobs.find(request.id)
        else:  # before the core is ready only the store can know it
            stored = await self._core.responses.get(request.id)
            found = stored.response if stored is not None else None
        if found is None:
            raise not_found("Response", request.id)
        return st.GetResponseResponse(response=found)

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
        await self._core.events.delete(request.id)  # a background response's replay log
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

    async def ListInputItems(
        self, request: st.ListInputItemsRequest, context: Context
    ) -> st.ListInputItemsResponse:
        self._responses_enabled()
        stored = await self._core.responses.get(request.id)
        if stored is None:
            raise not_found("Response", request.id)
        # The context is everything the response continued from, then its output.
        inputs = stored.context[: len(stored.context) - len(stored.response.output)]
        return st.ListInputItemsResponse(page=page(inputs, request.page))

    async def CreateConversation(
        self, request: st.CreateConversationRequest, context: Context
    ) -> st.CreateConversationResponse:
        info = await self._api.create(request.items, request.metadata)
        return st.CreateConversationResponse(conversation=info)

    async def RetrieveConversation(
        self, request: st.RetrieveConversationRequest, context: Context
    ) -> st.RetrieveConversationResponse:
        return st.RetrieveConversationResponse(conversation=await self._api.retrieve(request.id))

    async def UpdateConversation(
        self, request: st.UpdateConversationRequest, context: Context
    ) -> st.UpdateConversationResponse:
        info = await self._api.update(request.id, request.metadata)
        return st.UpdateConversationResponse(conversation=info)

    async def ListConversationItems(
        self, request: st.ListConversationItemsRequest, context: Context
    ) -> st.ListConversationItemsResponse:
        items = await self._api.list_items(request.id, request.page)
        return st.ListConversationItemsResponse(page=items)

    async def AddConversationItems(
        self, request: st.AddConversationItemsRequest, context: Context
    ) -> st.AddConversationItemsResponse:
        added = await self._api.add_items(request.id, request.items, request.include)
        return st.AddConversationItemsResponse(page=added)

    async def GetConversationItem(
        self, request: st.GetConversationItemRequest, context: Context
    ) -> st.GetConversationItemResponse:
        item = await self._api.get_item(request.conversation_id, request.item_id, request.include)
        return st.GetConversationItemResponse(item=item)

    async def DeleteConversationItem(
        self, request: st.DeleteConversationItemRequest, context: Context
    ) -> st.DeleteConversationItemResponse:
        info = await self._api.delete_item(request.conversation_id, request.item_id)
        return st.DeleteConversationItemResponse(conversation=info)
