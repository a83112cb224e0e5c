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

    async def append(self, conversation_id: str, items: list[pb.Item]) -> None:
        await self.inner.append(owned_name(conversation_id), items)

    async def delete(self, conversation_id: str) -> bool:
        return await self.inner.delete(owned_name(conversation_id))

    async def occupancy(self) -> Occupancy:
        return await self.inner.occupancy()
