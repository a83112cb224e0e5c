"""The shared Redis backend of the response and conversation stores (`--store redis://...`).

Layout: each store is a bounded map under a namespace (`mlx-responses:responses`, ...) made of
four index keys (a sorted set of last use for LRU order, a sorted set of deadlines, a hash of
entry sizes, a hash holding the byte total, the eviction count and the use tick) and one value
key per entry (a string for a stored response, a Redis list for a conversation transcript).

Concurrency: every operation (put, append, get, delete, occupancy) is ONE Lua script, which
Redis runs atomically: no other client's command interleaves. So however many cores share the
Redis, the entry limit and the byte budget hold exactly after every operation, LRU eviction picks
the globally least recently used entry, a get refreshes recency atomically with the read, and two
replicas appending to one conversation at once both land, one after the other (no lost update).
A read-modify-write never happens in Python.

TTL: value keys carry a Redis expiry (PEXPIRE), so Redis itself frees what nobody touches again;
the deadline set mirrors those expiries (computed from the caller's wall clock, passed to the
script) and each script first purges what has expired, which keeps the accounting exact and the
eviction counter honest. NOTE: replicas' clocks should agree (NTP) to within the precision a TTL
needs; the limits and the TTL passed by the last writer apply, so configure every replica alike.

Failure: an unreachable Redis raises STORE_UNAVAILABLE (gRPC UNAVAILABLE, HTTP 503); the client
reconnects by itself on the next call, and EVALSHA reloads scripts a restarted Redis forgot.
"""

from __future__ import annotations

import struct
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.stores import redis_scripts as lua
from mlx_responses.service.stores.base import Occupancy, StoredResponse
from mlx_responses.service.stores.transcript import (
    decode_header,
    encode_header,
    is_header,
    item_id_of,
    new_info,
)
from redis import exceptions as redis_errors
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st

NAMESPACE = "mlx-responses"


def connect(url: str) -> aioredis.Redis:
    """A client for `redis://host:port/db` that fails fast (a 503) while Redis is down."""
    return aioredis.Redis.from_url(
        url,
        socket_connect_timeout=2,
        socket_timeout=10,
        # A couple of quick retries ride over a dropped connection, not over an outage.
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
        health_check_interval=15,
    )


@asynccontextmanager
async def reachable() -> AsyncIterator[None]:
    """Turns a lost Redis into STORE_UNAVAILABLE, so clients see a clear 503."""
    try:
        yield
    except (redis_errors.ConnectionError, redis_errors.TimeoutError) as exc:
        raise ServiceError(
            Reason.STORE_UNAVAILABLE,
            f"The shared store (Redis) is unavailable: {exc}; retry shortly.",
        ) from exc


def pack(messages: list[bytes]) -> bytes:
    """Length-prefixed frames (a stored response: the response, then its context items)."""
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


def unpack(blob: bytes) -> list[bytes]:
    """The frames of `pack`."""
    out, at = [], 0
    while at < len(blob):
        (n,) = struct.unpack_from(">I", blob, at)
        out.append(blob[at + 4 : at + 4 + n])
        at += 4 + n
    return out


class RedisBoundedMap:
    """Entries beyond `max_entries` or `max_bytes` go least recently used first; TTL expires.

    `max_entries == 0` means disabled (callers refuse use); `max_bytes == 0` keeps nothing.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        namespace: str,
        max_entries: int,
        max_bytes: int,
        ttl_secs: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_ms = int(ttl_secs * 1000)
        self._clock = clock
        self._client = client
        self._keys = [f"{namespace}:{k}" for k in ("lru", "exp", "size", "meta")]
        self._prefix = f"{namespace}:v:"
        self._put = client.register_script(lua.PUT)
        self._append = client.register_script(lua.APPEND)
        self._get = client.register_script(lua.GET)
        self._delete = client.register_script(lua.DELETE)
        self._occupancy = client.register_script(lua.OCCUPANCY)
        self._set_head = client.register_script(lua.SET_HEAD)
        self._remove_entry = client.register_script(lua.REMOVE_ENTRY)

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def _args(self, *args: Any) -> list[Any]:
        return [self._prefix, int(self._clock() * 1000), *args]

    async def put(self, key: str, value: bytes, nbytes: int) -> bool:
        """Stores `value`; False if it could not be kept (disabled or over budget)."""
        if not self.enabled:
            return False
        args = self._args(key, value, nbytes, self.ttl_ms, self.max_entries, self.max_bytes)
        async with reachable():
            return bool(await self._put(keys=self._keys, args=args))

    async def append(self, key: str, values: list[bytes], nbytes: int, header: bytes = b"") -> bool:
        """Appends to the list under `key`; False if the list was dropped.

        A new list starts with `header` (counted as its length) when one is given.
        """
        if not self.enabled:
            return False
        limits = (self.ttl_ms, self.max_entries, self.max_bytes)
        args = self._args(key, nbytes, *limits, header, *values)
        async with reachable():
            return bool(await self._append(keys=self._keys, args=args))

    async def get(self, key: str) -> bytes | None:
        """The value, refreshed as most recently used; None if absent or expired."""
        async with reachable():
            value = await self._get(keys=self._keys, args=self._args(key, "string"))
        return bytes(value) if value is not None else None

    async def get_list(self, key: str) -> list[bytes] | None:
        """The list under `key`, refreshed as most recently used; None if absent."""
        async with reachable():
            reply = await self._get(keys=self._keys, args=self._args(key, "list"))
        return [bytes(v) for v in reply[1:]] if reply is not None else None

    async def get_range(self, key: str, mode: str, start: int = 0) -> list[bytes] | None:
        """Part of the list under `key`: its `head` (first entry) or its `tail` from `start`."""
        async with reachable():
            reply = await self._get(keys=self._keys, args=self._args(key, mode, start))
        return [bytes(v) for v in reply[1:]] if reply is not None else None

    async def set_head(self, key: str, head: bytes) -> bool:
        """Replaces (or adds) the header entry of the list under `key`; False if absent."""
        args = self._args(key, head, self.max_entries, self.max_bytes)
        async with reachable():
            return bool(await self._set_head(keys=self._keys, args=args))

    async def remove_entry(self, key: str, entry: bytes) -> bool:
        """Removes one entry equal to `entry` from the list under `key`; False if none."""
        async with reachable():
            return bool(await self._remove_entry(keys=self._keys, args=self._args(key, entry)))

    async def exists(self, key: str) -> bool:
        """Whether `key` is held (refreshing it, as a read does)."""
        async with reachable():
            return await self._get(keys=self._keys, args=self._args(key, "exists")) is not None

    async def delete(self, key: str) -> bool:
        """Removes `key`; False if it was not there."""
        async with reachable():
            return bool(await self._delete(keys=self._keys, args=self._args(key)))

    async def ping(self) -> None:
        """One PING: STORE_UNAVAILABLE unless Redis answers."""
        async with reachable():
            await self._client.ping()

    async def occupancy(self) -> Occupancy:
        """Entries, bytes and evictions, after purging what expired."""
        async with reachable():
            entries, nbytes, evictions = await self._occupancy(keys=self._keys, args=self._args())
        return Occupancy(
            int(entries), int(nbytes), self.max_entries, self.max_bytes, int(evictions)
        )


class RedisResponseStore:
    """Stored responses: the response and its context items, packed into one value."""

    def __init__(self, bounded: RedisBoundedMap) -> None:
        self._map = bounded

    @property
    def enabled(self) -> bool:
        return self._map.enabled

    async def put(self, stored: StoredResponse) -> bool:
        blob = pack(
            [stored.response.SerializeToString(), *(i.SerializeToString() for i in stored.context)]
        )
        return await self._map.put(stored.response.id, blob, stored.nbytes())

    async def get(self, response_id: str) -> StoredResponse | None:
        blob = await self._map.get(response_id)
        if blob is None:
            return None
        head, *items = unpack(blob)
        return StoredResponse(
            response=pb.Response.FromString(head), context=[pb.Item.FromString(i) for i in items]
        )

    async def delete(self, response_id: str) -> bool:
        return await self._map.delete(response_id)

    async def occupancy(self) -> Occupancy:
        return await self._map.occupancy()

    async def check(self) -> None:
        await self._map.ping()


class RedisConversationStore:
    """Conversation transcripts as Redis lists of items; a finished turn is appended in place."""

    def __init__(self, bounded: RedisBoundedMap) -> None:
        self._map = bounded

    @property
    def enabled(self) -> bool:
        return self._map.enabled

    async def items(self, conversation_id: str) -> list[pb.Item]:
        raw = await self._map.get_list(conversation_id)
        return [pb.Item.FromString(i) for i in raw or [] if not is_header(i)]

    async def exists(self, conversation_id: str) -> bool:
        return await self._map.exists(conversation_id)

    async def append(
        self,
        conversation_id: str,
        items: list[pb.Item],
        info: st.ConversationObject | None = None,
    ) -> bool:
        nbytes = sum(item.ByteSize() for item in items)
        header = encode_header(info or new_info(conversation_id))
        values = [i.SerializeToString() for i in items]
        return await self._map.append(conversation_id, values, nbytes, header)

    async def info(self, conversation_id: str) -> st.ConversationObject | None:
        head = await self._map.get_range(conversation_id, "head")
        if head is None:
            return None
        if head and is_header(head[0]):
            return decode_header(head[0])
        return new_info(conversation_id, created_at=0)  # written before conversation objects

    async def set_metadata(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> st.ConversationObject | None:
        held = await self.info(conversation_id)
        if held is None:
            return None
        info = new_info(conversation_id, metadata, held.created_at)
        if not await self._map.set_head(conversation_id, encode_header(info)):
            return None
        return info

    async def remove_item(self, conversation_id: str, item_id: str) -> bool:
        raw = await self._map.get_list(conversation_id)
        for entry in raw or []:
            if not is_header(entry) and item_id_of(pb.Item.FromString(entry)) == item_id:
                return await self._map.remove_entry(conversation_id, entry)
        return False

    async def delete(self, conversation_id: str) -> bool:
        return await self._map.delete(conversation_id)

    async def occupancy(self) -> Occupancy:
        return await self._map.occupancy()


class RedisEventLog:
    """Background responses' events as Redis lists: every replica replays and follows them."""

    def __init__(self, bounded: RedisBoundedMap) -> None:
        self._map = bounded

    async def append(self, response_id: str, events: list[ev.ResponseEvent]) -> None:
        values = [e.SerializeToString() for e in events]
        await self._map.append(response_id, values, sum(len(v) for v in values))

    async def read(self, response_id: str, start: int) -> list[ev.ResponseEvent] | None:
        raw = await self._map.get_range(response_id, "tail", max(start, 0))
        return [ev.ResponseEvent.FromString(v) for v in raw] if raw is not None else None

    async def delete(self, response_id: str) -> bool:
        return await self._map.delete(response_id)
