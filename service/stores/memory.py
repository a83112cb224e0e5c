"""The embedded in-memory stores (the default backend)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mlx_responses.v1 import responses_pb2 as pb
from service.stores.base import Occupancy, StoredResponse
from service.stores.lru import BoundedLru


def _occupancy(lru: BoundedLru[object]) -> Occupancy:
    return Occupancy(len(lru), lru.bytes, lru.max_entries, lru.max_bytes, lru.evictions)


class InMemoryResponseStore:
    """Stored responses in a BoundedLru."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl_secs: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lru: BoundedLru[StoredResponse] = BoundedLru(max_entries, max_bytes, ttl_secs, clock)

    @property
    def enabled(self) -> bool:
        return self._lru.enabled

    async def put(self, stored: StoredResponse) -> bool:
        return self._lru.put(stored.response.id, stored, stored.nbytes())

    async def get(self, response_id: str) -> StoredResponse | None:
        return self._lru.get(response_id)

    async def delete(self, response_id: str) -> bool:
        return self._lru.pop(response_id) is not None

    async def occupancy(self) -> Occupancy:
        return _occupancy(self._lru)  # type: ignore[arg-type]


class InMemoryConversationStore:
    """Conversation transcripts in a BoundedLru; appends are serialised per store."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl_secs: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lru: BoundedLru[list[pb.Item]] = BoundedLru(max_entries, max_bytes, ttl_secs, clock)
        self._lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        return self._lru.enabled

    async def items(self, conversation_id: str) -> list[pb.Item]:
        return list(self._lru.get(conversation_id) or [])

    async def exists(self, conversation_id: str) -> bool:
        return self._lru.get(conversation_id) is not None

    async def append(self, conversation_id: str, items: list[pb.Item]) -> None:
        async with self._lock:
            transcript = [*(self._lru.get(conversation_id) or []), *items]
            nbytes = sum(item.ByteSize() for item in transcript)
            self._lru.put(conversation_id, transcript, nbytes)

    async def delete(self, conversation_id: str) -> bool:
        return self._lru.pop(conversation_id) is not None

    async def occupancy(self) -> Occupancy:
        return _occupancy(self._lru)  # type: ignore[arg-type]
