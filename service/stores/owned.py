"""Conversations per API key (`--isolate-keys`): each key's ids name its own transcripts.

Conversation ids are the client's own names, so they cannot carry an owner tag as response ids
do (service/ids.py); the store key is the id in the owner's namespace (the key's hash, never
the key), so another key's `conv_x` is another transcript, and reading the owner's is a 404.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlx_responses.service.ids import owned_name
from mlx_responses.service.stores.base import ConversationStore, Occupancy

from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st


def _named(
    info: st.ConversationObject | None, conversation_id: str
) -> st.ConversationObject | None:
    """The object under the id its owner knows (a store may have named it by its store key)."""
    if info is not None:
        info.id = conversation_id
    return info


@dataclass
class OwnedConversations:
    """A ConversationStore whose ids live in the current owner's namespace."""

    inner: ConversationStore

    @property
    def enabled(self) -> bool:
        return self.inner.enabled

    async def items(self, conversation_id: str) -> list[pb.Item]:
        return await self.inner.items(owned_name(conversation_id))

    async def exists(self, conversation_id: str) -> bool:
        return await self.inner.exists(owned_name(conversation_id))

    async def append(
        self,
        conversation_id: str,
        items: list[pb.Item],
        info: st.ConversationObject | None = None,
    ) -> bool:
        return await self.inner.append(owned_name(conversation_id), items, info)

    async def info(self, conversation_id: str) -> st.ConversationObject | None:
        return _named(await self.inner.info(owned_name(conversation_id)), conversation_id)

    async def set_metadata(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> st.ConversationObject | None:
        updated = await self.inner.set_metadata(owned_name(conversation_id), metadata)
        return _named(updated, conversation_id)

    async def remove_item(self, conversation_id: str, item_id: str) -> bool:
        return await self.inner.remove_item(owned_name(conversation_id), item_id)

    async def delete(self, conversation_id: str) -> bool:
        return await self.inner.delete(owned_name(conversation_id))

    async def occupancy(self) -> Occupancy:
        return await self.inner.occupancy()
