"""The Conversations API over the conversation store: objects, items, paging.

`POST /v1/conversations` makes a `conv_...` id; a response created with a client-named
`conversation` makes its transcript on first use, as before, and both kinds answer every route.
Items get ids scoped to their conversation (service/item_ids.py) unless they carry one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from mlx_responses.service.errors import Reason, ServiceError, invalid
from mlx_responses.service.limits import (
    MAX_ITEMS_PER_CALL,
    MAX_METADATA_KEY,
    MAX_METADATA_PAIRS,
    MAX_METADATA_VALUE,
)
from mlx_responses.service.responses.events import new_id
from mlx_responses.service.responses.history import store_disabled
from mlx_responses.service.responses.item_ids import assign_ids
from mlx_responses.service.responses.item_pages import check_include, page, shown
from mlx_responses.service.stores.base import ConversationStore
from mlx_responses.service.stores.transcript import item_id_of, new_info

from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st


def not_found(conversation_id: str) -> ServiceError:
    """404 for an unknown, deleted, evicted or expired conversation."""
    return ServiceError(
        Reason.NOT_FOUND, f"Conversation with id '{conversation_id}' not found.", param="id"
    )


def check_metadata(metadata: Mapping[str, str]) -> None:
    """OpenAI's metadata limits: 16 pairs, keys up to 64 characters, values up to 512."""
    if len(metadata) > MAX_METADATA_PAIRS:
        raise invalid(
            f"Invalid 'metadata': at most {MAX_METADATA_PAIRS} pairs.", "metadata", "invalid_value"
        )
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY:
            raise invalid(
                f"Invalid 'metadata': keys are at most {MAX_METADATA_KEY} characters.",
                "metadata",
                "invalid_value",
            )
        if len(value) > MAX_METADATA_VALUE:
            raise invalid(
                f"Invalid 'metadata.{key}': values are at most {MAX_METADATA_VALUE} characters.",
                f"metadata.{key}",
                "invalid_value",
            )


def _check_items(items: Sequence[pb.Item]) -> None:
    if len(items) > MAX_ITEMS_PER_CALL:
        raise invalid(
            f"Invalid 'items': at most {MAX_ITEMS_PER_CALL} items per call.",
            "items",
            "array_above_max_length",
        )
    for i, item in enumerate(items):
        kind = item.WhichOneof("item")
        # A reference or a compaction trigger is a request to the core, not a transcript item.
        if kind in (None, "item_reference", "compaction_trigger"):
            raise invalid(
                f"Invalid 'items[{i}].type': conversation items must be whole items.",
                f"items[{i}].type",
                "invalid_value",
            )


class Conversations:
    """What the Conversations API asks of the core's conversation store."""

    def __init__(self, store: ConversationStore, ids: Callable[[str], str] = new_id) -> None:
        self._store = store
        self._ids = ids

    @property
    def store(self) -> ConversationStore:
        if not self._store.enabled:
            raise store_disabled("The conversation store", "conversation")
        return self._store

    async def create(
        self, items: Sequence[pb.Item], metadata: Mapping[str, str]
    ) -> st.ConversationObject:
        store = self.store
        _check_items(items)
        check_metadata(metadata)
        info = new_info(self._ids("conv"), dict(metadata))
        added = [_copy(item) for item in items]
        assign_ids(added, info.id)
        await store.append(info.id, added, info)
        return info

    async def retrieve(self, conversation_id: str) -> st.ConversationObject:
        info = await self.store.info(conversation_id)
        if info is None:
            raise not_found(conversation_id)
        return info

    async def update(
        self, conversation_id: str, metadata: Mapping[str, str]
    ) -> st.ConversationObject:
        check_metadata(metadata)
        info = await self.store.set_metadata(conversation_id, dict(metadata))
        if info is None:
            raise not_found(conversation_id)
        return info

    async def delete(self, conversation_id: str) -> None:
        if not await self.store.delete(conversation_id):
            raise not_found(conversation_id)

    async def _items(self, conversation_id: str) -> list[pb.Item]:
        store = self.store
        if not await store.exists(conversation_id):
            raise not_found(conversation_id)
        return await store.items(conversation_id)

    async def list_items(self, conversation_id: str, query: st.ItemPageQuery) -> st.ItemPage:
        return page(await self._items(conversation_id), query)

    async def add_items(
        self, conversation_id: str, items: Sequence[pb.Item], include: Sequence[str]
    ) -> st.ItemPage:
        store = self.store
        _check_items(items)
        check_include(include)
        if not await store.exists(conversation_id):
            raise not_found(conversation_id)
        added = [_copy(item) for item in items]
        assign_ids(added, conversation_id)
        await store.append(conversation_id, added)
        shown_items = [shown(item, include) for item in added]
        return st.ItemPage(
            items=shown_items,
            first_id=item_id_of(added[0]) if added else "",
            last_id=item_id_of(added[-1]) if added else "",
            has_more=False,
        )

    async def get_item(self, conversation_id: str, item_id: str, include: Sequence[str]) -> pb.Item:
        check_include(include)
        for item in await self._items(conversation_id):
            if item_id_of(item) == item_id:
                return shown(item, include)
        raise _item_not_found(item_id)

    async def delete_item(self, conversation_id: str, item_id: str) -> st.ConversationObject:
        info = await self.retrieve(conversation_id)
        if not await self.store.remove_item(conversation_id, item_id):
            raise _item_not_found(item_id)
        return info


def _item_not_found(item_id: str) -> ServiceError:
    return ServiceError(Reason.NOT_FOUND, f"Item with id '{item_id}' not found.", param="item_id")


def _copy(item: pb.Item) -> pb.Item:
    copy = pb.Item()
    copy.CopyFrom(item)
    return copy
