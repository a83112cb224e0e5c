"""`--isolate-keys` in one place: every lookup by id passes the owner check here.

The core holds each store (and its in-memory maps of running responses) only through these
wrappers (`owned_stores`), so a route, RPC or lookup path added later cannot skip the check: to
another key, an id it does not own is an id that names nothing, answered as such by the same
code that answers an unknown id. Without `--isolate-keys` no owner is bound (service/ids.py)
and every wrapper passes its calls through unchanged.

Response ids carry their owner's tag (`owns`); item ids name their response's (or
conversation's) id (service/responses/item_ids.py), so an `item_reference` is checked through
the store lookup it makes. Conversation ids are the client's own names, so they cannot carry an
owner tag: the store key is the id in the owner's namespace (the key's hash, never the key), so
another key's `conv_x` is another transcript, and reading the owner's is a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar, overload

from mlx_responses.service.ids import owned_name, owns
from mlx_responses.service.stores.base import (
    Admission,
    ConversationStore,
    EventLog,
    JobBoard,
    Occupancy,
    ResponseStore,
    StoredResponse,
)
from mlx_responses.service.stores.select import Stores

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st

V = TypeVar("V")
T = TypeVar("T")
_MISSING: Any = object()


class OwnedMap(dict[str, V]):
    """A map by response id in which another owner's ids are absent.

    Lookups (`in`, `[]`, `get`, `pop`) see the current owner's entries only; iteration sees
    every entry, for the core's own sweeps (lease renewal, metrics, drain), which run bound to
    no owner.
    """

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and owns(key) and super().__contains__(key)

    def __getitem__(self, key: str) -> V:
        if not owns(key):
            raise KeyError(key)
        return super().__getitem__(key)

    @overload
    def get(self, key: str, default: None = None, /) -> V | None: ...
    @overload
    def get(self, key: str, default: V | T, /) -> V | T: ...
    def get(self, key: str, default: Any = None, /) -> Any:
        return super().get(key, default) if owns(key) else default

    @overload
    def pop(self, key: str, /) -> V: ...
    @overload
    def pop(self, key: str, default: V | T, /) -> V | T: ...
    def pop(self, key: str, default: Any = _MISSING, /) -> Any:
        if owns(key):
            return super().pop(key) if default is _MISSING else super().pop(key, default)
        if default is _MISSING:
            raise KeyError(key)
        return default


@dataclass
class OwnedResponses:
    """A ResponseStore in which another owner's responses are absent."""

    inner: ResponseStore

    @property
    def enabled(self) -> bool:
        return self.inner.enabled

    async def put(self, stored: StoredResponse) -> bool:
        # Only a response made under the current owner is stored under its id.
        return owns(stored.response.id) and await self.inner.put(stored)

    async def get(self, response_id: str) -> StoredResponse | None:
        return await self.inner.get(response_id) if owns(response_id) else None

    async def delete(self, response_id: str) -> bool:
        return owns(response_id) and await self.inner.delete(response_id)

    async def occupancy(self) -> Occupancy:
        return await self.inner.occupancy()

    async def check(self) -> None:
        await self.inner.check()


@dataclass
class OwnedEvents:
    """An EventLog in which another owner's background responses have no log."""

    inner: EventLog

    async def append(self, response_id: str, events: list[ev.ResponseEvent]) -> None:
        if owns(response_id):
            await self.inner.append(response_id, events)

    async def read(self, response_id: str, start: int) -> list[ev.ResponseEvent] | None:
        return await self.inner.read(response_id, start) if owns(response_id) else None

    async def delete(self, response_id: str) -> bool:
        return owns(response_id) and await self.inner.delete(response_id)


@dataclass
class OwnedBoard:
    """A JobBoard on which another owner's jobs and foreground responses do not show.

    Reads and the calls that reach another response (cancel, forget) answer as for an unknown
    id; the rest write the caller's own responses, or run bound to no owner (lease renewal).
    """

    inner: JobBoard

    async def admit(
        self, view: pb.Response, nbytes: int, max_jobs: int, max_bytes: int, lease_secs: float
    ) -> Admission:
        return await self.inner.admit(view, nbytes, max_jobs, max_bytes, lease_secs)

    async def post(self, view: pb.Response, lease_secs: float) -> None:
        await self.inner.post(view, lease_secs)

    async def view(self, response_id: str) -> pb.Response | None:
        return await self.inner.view(response_id) if owns(response_id) else None

    async def remove(self, response_id: str) -> None:
        await self.inner.remove(response_id)

    async def renew(self, response_ids: list[str], lease_secs: float) -> list[str]:
        return await self.inner.renew(response_ids, lease_secs)

    async def request_cancel(self, response_id: str) -> None:
        if owns(response_id):
            await self.inner.request_cancel(response_id)

    async def listen(self, on_cancel: Callable[[str], None]) -> None:
        await self.inner.listen(on_cancel)

    async def keep(self, final: pb.Response, nbytes: int) -> bool:
        return await self.inner.keep(final, nbytes)

    async def kept(self, response_id: str) -> pb.Response | None:
        return await self.inner.kept(response_id) if owns(response_id) else None

    async def forget(self, response_id: str) -> bool:
        return owns(response_id) and await self.inner.forget(response_id)

    async def claim(self, response_id: str, lease_secs: float) -> None:
        await self.inner.claim(response_id, lease_secs)

    async def unclaim(self, response_id: str) -> None:
        await self.inner.unclaim(response_id)

    async def claimed(self, response_id: str) -> bool:
        return owns(response_id) and await self.inner.claimed(response_id)

    async def renew_claims(self, response_ids: list[str], lease_secs: float) -> list[str]:
        return await self.inner.renew_claims(response_ids, lease_secs)

    async def answer(self, final: pb.Response) -> None:
        await self.inner.answer(final)

    async def answered(self, response_id: str) -> pb.Response | None:
        return await self.inner.answered(response_id) if owns(response_id) else None

    async def close(self) -> None:
        await self.inner.close()


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


def owned_stores(stores: Stores) -> Stores:
    """The stores as the core holds them: each lookup by id checks the current owner."""
    responses, conversations = stores.responses, stores.conversations
    board, events = stores.board, stores.events
    return replace(
        stores,
        responses=responses if isinstance(responses, OwnedResponses) else OwnedResponses(responses),
        conversations=conversations
        if isinstance(conversations, OwnedConversations)
        else OwnedConversations(conversations),
        board=board if isinstance(board, OwnedBoard) else OwnedBoard(board),
        events=events if isinstance(events, OwnedEvents) else OwnedEvents(events),
    )
