"""The store interfaces the core depends on; a shared backend (Redis) implements the same."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from mlx_responses.v1 import responses_pb2 as pb


@dataclass
class StoredResponse:
    """A finished response and the whole context a later turn continues from.

    `context` is every item of the chain up to and including this response's output
    (instructions excluded: they are not carried across previous_response_id).
    """

    response: pb.Response
    context: list[pb.Item] = field(default_factory=list)

    def nbytes(self) -> int:
        """Approximate retained bytes (serialized size)."""
        return self.response.ByteSize() + sum(item.ByteSize() for item in self.context)


@dataclass(frozen=True)
class Occupancy:
    """What a store holds against its limits."""

    entries: int
    bytes: int
    max_entries: int
    max_bytes: int
    evictions: int


class ResponseStore(Protocol):
    """Stored responses by id."""

    @property
    def enabled(self) -> bool:
        """False when persistence is disabled (entry limit 0)."""
        ...

    async def put(self, stored: StoredResponse) -> bool:
        """Stores it (False if it was evicted at once)."""
        ...

    async def get(self, response_id: str) -> StoredResponse | None:
        """The stored response, or None if unknown, evicted or expired."""
        ...

    async def delete(self, response_id: str) -> bool:
        """Removes it; False if it was not there."""
        ...

    async def occupancy(self) -> Occupancy:
        """Entries and bytes held."""
        ...


class ConversationStore(Protocol):
    """Conversation transcripts by id."""

    @property
    def enabled(self) -> bool:
        """False when conversations are disabled (entry limit 0)."""
        ...

    async def items(self, conversation_id: str) -> list[pb.Item]:
        """The transcript (empty for a new conversation)."""
        ...

    async def exists(self, conversation_id: str) -> bool:
        """Whether a transcript is held."""
        ...

    async def append(self, conversation_id: str, items: list[pb.Item]) -> None:
        """Appends a finished turn."""
        ...

    async def delete(self, conversation_id: str) -> bool:
        """Removes the transcript; False if it was not there."""
        ...

    async def occupancy(self) -> Occupancy:
        """Entries and bytes held."""
        ...
