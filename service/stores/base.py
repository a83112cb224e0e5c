"""The store interfaces the core depends on; a shared backend (Redis) implements the same."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st

# What one stored response costs beyond its serialized bytes (the in-memory store: the bytes
# objects, the entry, its key, map and expiry slots, allocator slack; measured by
# tests/unit/test_store_rss.py at ~800 B). Counted against the byte budget, so it holds in RSS.
ENTRY_OVERHEAD_BYTES = 1024


@dataclass
class StoredResponse:
    """A finished response and the whole context a later turn continues from.

    `context` is every item of the chain up to and including this response's output
    (instructions excluded: they are not carried across previous_response_id).
    """

    response: pb.Response
    context: list[pb.Item] = field(default_factory=list)

    def nbytes(self) -> int:
        """Retained bytes as the stores count them: serialized size plus the entry overhead."""
        serialized = self.response.ByteSize() + sum(item.ByteSize() for item in self.context)
        return serialized + ENTRY_OVERHEAD_BYTES


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

    async def check(self) -> None:
        """Raises STORE_UNAVAILABLE when the backend cannot be reached now (a cheap ping)."""
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

    async def append(
        self,
        conversation_id: str,
        items: list[pb.Item],
        info: st.ConversationObject | None = None,
    ) -> bool:
        """Appends items (a finished turn); False if the transcript was dropped (over budget).

        A new conversation starts with `info` (its created_at and metadata), or with one made
        now (empty metadata) when none is given; `info` is ignored for an existing one.
        """
        ...

    async def info(self, conversation_id: str) -> st.ConversationObject | None:
        """The conversation object (created_at 0 for a transcript older than objects)."""
        ...

    async def set_metadata(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> st.ConversationObject | None:
        """Replaces the metadata; None if the conversation is not held."""
        ...

    async def remove_item(self, conversation_id: str, item_id: str) -> bool:
        """Removes the item with that id; False if the conversation or the item is not held."""
        ...

    async def delete(self, conversation_id: str) -> bool:
        """Removes the transcript; False if it was not there."""
        ...

    async def occupancy(self) -> Occupancy:
        """Entries and bytes held."""
        ...


class EventLog(Protocol):
    """The streamed events of background responses, by response id, for replay (resume).

    Bounded like the response store (entries, bytes, TTL: a log lives about as long as the
    response object it belongs to); a shared backend lets every replica replay and follow.
    """

    async def append(self, response_id: str, events: list[ev.ResponseEvent]) -> None:
        """Appends a batch; the events' sequence numbers are their positions in the log."""
        ...

    async def read(self, response_id: str, start: int) -> list[ev.ResponseEvent] | None:
        """The events from position `start` on; None if no log is held for that id."""
        ...

    async def delete(self, response_id: str) -> bool:
        """Drops the log; False if none was held."""
        ...


class Admission(enum.Enum):
    """What the job board answered a new background job."""

    ADMITTED = "admitted"
    TOO_MANY_JOBS = "too_many_jobs"  # --responses-background-max-jobs are active
    OVER_BUDGET = "over_budget"  # the active jobs' bytes would pass the store's byte budget


class JobBoard(Protocol):
    """Where background jobs are visible to every replica: active poll views, kept finals, cancel.

    The core running a job posts its poll view (with a lease it keeps renewing), any core reads
    it; a cancel asked of any core reaches the owner through `request_cancel`. The admission
    limits count every active job on the board, so they hold across the replicas sharing it.
    """

    async def admit(
        self, view: pb.Response, nbytes: int, max_jobs: int, max_bytes: int, lease_secs: float
    ) -> Admission:
        """Posts a new job's poll view for `lease_secs` if the active jobs leave room for it.

        Atomic: fewer than `max_jobs` active and their bytes plus `nbytes` within `max_bytes`.
        """
        ...

    async def post(self, view: pb.Response, lease_secs: float) -> None:
        """Updates the poll view of an admitted job, for `lease_secs`."""
        ...

    async def view(self, response_id: str) -> pb.Response | None:
        """The poll view of a job active on any replica, or None."""
        ...

    async def remove(self, response_id: str) -> None:
        """The job has ended (its final object is kept elsewhere by then)."""
        ...

    async def renew(self, response_ids: list[str], lease_secs: float) -> list[str]:
        """Renews the leases of this replica's active jobs; returns those asked to cancel."""
        ...

    async def request_cancel(self, response_id: str) -> None:
        """Asks the replica running the job to cancel it."""
        ...

    async def listen(self, on_cancel: Callable[[str], None]) -> None:
        """From now on, cancel requests for any job are handed to `on_cancel` (the owner checks)."""
        ...

    async def keep(self, final: pb.Response, nbytes: int) -> bool:
        """Keeps a final object readable for the ephemeral TTL (store:false, oversized stubs)."""
        ...

    async def kept(self, response_id: str) -> pb.Response | None:
        """A kept final object, or None."""
        ...

    async def forget(self, response_id: str) -> bool:
        """Drops a kept final object; False if none."""
        ...

    # Foreground responses are claimed too, so a cancel asked of another replica reaches them.
    async def claim(self, response_id: str, lease_secs: float) -> None:
        """Marks a foreground response as running on this replica for `lease_secs`."""
        ...

    async def unclaim(self, response_id: str) -> None:
        """The foreground response has ended (a cancel answer is kept by then)."""
        ...

    async def claimed(self, response_id: str) -> bool:
        """Whether a foreground response runs on another replica (a shared board only)."""
        ...

    async def renew_claims(self, response_ids: list[str], lease_secs: float) -> list[str]:
        """Renews this replica's claims; returns those asked to cancel."""
        ...

    async def answer(self, final: pb.Response) -> None:
        """Hands the final object of a foreground response cancelled for another replica."""
        ...

    async def answered(self, response_id: str) -> pb.Response | None:
        """The answer to a cancel asked of another replica, once it has come."""
        ...

    async def close(self) -> None:
        """Stops listening."""
        ...
