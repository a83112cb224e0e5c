"""The embedded in-memory stores and job board (the default backend, one replica)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mlx_responses.service.stores.base import Admission, Occupancy, StoredResponse
from mlx_responses.service.stores.lru import BoundedLru
from mlx_responses.service.stores.transcript import header_bytes, item_id_of, new_info

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st

# Kept final objects are bounded by their TTL; the caps only keep a flood in check.
EPHEMERAL_MAX_ENTRIES = 4096
# A stored response as kept: the serialized Response and the serialized context items.
Serialized = tuple[bytes, tuple[bytes, ...]]


def _occupancy(lru: BoundedLru[object]) -> Occupancy:
    return Occupancy(len(lru), lru.bytes, lru.max_entries, lru.max_bytes, lru.evictions)


def _serialize(stored: StoredResponse) -> Serialized:
    return stored.response.SerializeToString(), tuple(i.SerializeToString() for i in stored.context)


class InMemoryResponseStore:
    """Stored responses in a BoundedLru, serialized.

    Live protobuf objects take ~2.7x their serialized size in memory; kept as bytes, the byte
    budget is what the process actually holds (and a reader never aliases a stored object).
    """

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl_secs: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lru: BoundedLru[Serialized] = BoundedLru(max_entries, max_bytes, ttl_secs, clock)

    @property
    def enabled(self) -> bool:
        return self._lru.enabled

    async def put(self, stored: StoredResponse) -> bool:
        return self._lru.put(stored.response.id, _serialize(stored), stored.nbytes())

    async def get(self, response_id: str) -> StoredResponse | None:
        blob = self._lru.get(response_id)
        if blob is None:
            return None
        return StoredResponse(
            response=pb.Response.FromString(blob[0]),
            context=[pb.Item.FromString(item) for item in blob[1]],
        )

    async def delete(self, response_id: str) -> bool:
        return self._lru.pop(response_id) is not None

    async def occupancy(self) -> Occupancy:
        return _occupancy(self._lru)  # type: ignore[arg-type]

    async def check(self) -> None:
        return None  # in this process: always reachable


@dataclass
class _Transcript:
    info: st.ConversationObject
    items: list[pb.Item]

    def nbytes(self) -> int:
        return header_bytes(self.info) + sum(item.ByteSize() for item in self.items)


class InMemoryConversationStore:
    """Conversation transcripts in a BoundedLru; changes are serialised per store."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl_secs: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lru: BoundedLru[_Transcript] = BoundedLru(max_entries, max_bytes, ttl_secs, clock)
        self._lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        return self._lru.enabled

    async def items(self, conversation_id: str) -> list[pb.Item]:
        held = self._lru.get(conversation_id)
        return list(held.items) if held is not None else []

    async def exists(self, conversation_id: str) -> bool:
        return self._lru.get(conversation_id) is not None

    async def append(
        self,
        conversation_id: str,
        items: list[pb.Item],
        info: st.ConversationObject | None = None,
    ) -> bool:
        async with self._lock:
            held = self._lru.get(conversation_id)
            if held is None:
                held = _Transcript(info or new_info(conversation_id), [])
            transcript = _Transcript(held.info, [*held.items, *items])
            return self._lru.put(conversation_id, transcript, transcript.nbytes())

    async def info(self, conversation_id: str) -> st.ConversationObject | None:
        held = self._lru.get(conversation_id)
        if held is None:
            return None
        info = st.ConversationObject()
        info.CopyFrom(held.info)
        return info

    async def set_metadata(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> st.ConversationObject | None:
        async with self._lock:
            held = self._lru.get(conversation_id)
            if held is None:
                return None
            info = new_info(conversation_id, metadata, held.info.created_at)
            transcript = _Transcript(info, held.items)
            if not self._lru.put(conversation_id, transcript, transcript.nbytes()):
                return None
            return info

    async def remove_item(self, conversation_id: str, item_id: str) -> bool:
        async with self._lock:
            held = self._lru.get(conversation_id)
            if held is None:
                return False
            kept = [item for item in held.items if item_id_of(item) != item_id]
            if len(kept) == len(held.items):
                return False
            transcript = _Transcript(held.info, kept)
            self._lru.put(conversation_id, transcript, transcript.nbytes())
            return True

    async def delete(self, conversation_id: str) -> bool:
        return self._lru.pop(conversation_id) is not None

    async def occupancy(self) -> Occupancy:
        return _occupancy(self._lru)  # type: ignore[arg-type]


@dataclass
class _Log:
    entries: list[bytes] = field(default_factory=list)
    nbytes: int = 0


class InMemoryEventLog:
    """Background responses' events, serialized, in a BoundedLru (the response store's limits)."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl_secs: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lru: BoundedLru[_Log] = BoundedLru(max_entries, max_bytes, ttl_secs, clock)

    async def append(self, response_id: str, events: list[ev.ResponseEvent]) -> None:
        log = self._lru.get(response_id) or _Log()
        added = [e.SerializeToString() for e in events]
        log.entries += added  # in place: a long stream appends in O(batch), not O(log)
        log.nbytes += sum(len(e) for e in added)
        self._lru.put(response_id, log, log.nbytes)

    async def read(self, response_id: str, start: int) -> list[ev.ResponseEvent] | None:
        log = self._lru.get(response_id)
        if log is None:
            return None
        return [ev.ResponseEvent.FromString(e) for e in log.entries[max(start, 0) :]]

    async def delete(self, response_id: str) -> bool:
        return self._lru.pop(response_id) is not None


@dataclass
class InMemoryJobBoard:
    """Job views in this process: only its own jobs exist, so a cancel request never leaves it."""

    ephemeral_max_bytes: int
    ephemeral_ttl_secs: float
    clock: Callable[[], float] = time.monotonic
    views: dict[str, pb.Response] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._kept: BoundedLru[pb.Response] = BoundedLru(
            EPHEMERAL_MAX_ENTRIES, self.ephemeral_max_bytes, self.ephemeral_ttl_secs, self.clock
        )
        self._on_cancel: Callable[[str], None] | None = None

    async def admit(
        self, view: pb.Response, nbytes: int, max_jobs: int, max_bytes: int, lease_secs: float
    ) -> Admission:
        # No await before the views change: concurrent creates cannot overshoot the limits.
        if len(self.views) >= max_jobs:
            return Admission.TOO_MANY_JOBS
        if sum(self.sizes.values()) + nbytes > max_bytes:
            return Admission.OVER_BUDGET
        self.views[view.id] = view
        self.sizes[view.id] = nbytes
        return Admission.ADMITTED

    async def post(self, view: pb.Response, lease_secs: float) -> None:
        del lease_secs  # the process itself is the lease
        if view.id in self.views:
            self.views[view.id] = view

    async def view(self, response_id: str) -> pb.Response | None:
        return self.views.get(response_id)

    async def remove(self, response_id: str) -> None:
        self.views.pop(response_id, None)
        self.sizes.pop(response_id, None)

    async def renew(self, response_ids: list[str], lease_secs: float) -> list[str]:
        return []

    async def request_cancel(self, response_id: str) -> None:
        if self._on_cancel is not None:
            self._on_cancel(response_id)

    async def listen(self, on_cancel: Callable[[str], None]) -> None:
        self._on_cancel = on_cancel

    async def keep(self, final: pb.Response, nbytes: int) -> bool:
        return self._kept.put(final.id, final, nbytes)

    async def kept(self, response_id: str) -> pb.Response | None:
        return self._kept.get(response_id)

    async def forget(self, response_id: str) -> bool:
        return self._kept.pop(response_id) is not None

    # One process: its own in-flight responses are the only ones, found without a claim.
    async def claim(self, response_id: str, lease_secs: float) -> None:
        return None

    async def unclaim(self, response_id: str) -> None:
        return None

    async def claimed(self, response_id: str) -> bool:
        return False

    async def renew_claims(self, response_ids: list[str], lease_secs: float) -> list[str]:
        return []

    async def answer(self, final: pb.Response) -> None:
        return None

    async def answered(self, response_id: str) -> pb.Response | None:
        return None

    async def close(self) -> None:
        self._on_cancel = None
