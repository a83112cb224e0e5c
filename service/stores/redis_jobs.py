"""The Redis job board: background jobs visible to, and cancellable from, every replica.

An active job is one key holding its poll view, with a lease (PX) its owner renews every
heartbeat, so a job whose core died vanishes (404) once the lease runs out, as a restart loses
jobs in one process. An index of active jobs (a sorted set of lease deadlines and a hash of their
bytes) carries the admission limits: one Lua script counts it and admits a job or refuses it, so
`--responses-background-max-jobs` and the byte budget hold across every replica at once; a dead
core's jobs leave the index with their lease.

A cancel asked of another replica sets a cancel key and PUBLISHes the id on one channel; every
core subscribes, and the one running the job cancels it between decode steps (the engine checks
its cancel flag every token). The cancel key is the fallback for a message lost while a
subscriber reconnected: owners check it at every heartbeat. A foreground response is claimed by
a key with the same kind of lease, so a cancel reaches it the same way; its owner answers with
the final object under an answer key (the asker may not read a store:false one). Final objects
that are not stored responses (store:false, oversized stubs) live in a Redis bounded map with
the ephemeral TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from mlx_responses.service.stores import redis_scripts as lua
from mlx_responses.service.stores.base import Admission
from mlx_responses.service.stores.memory import EPHEMERAL_MAX_ENTRIES
from mlx_responses.service.stores.redis_store import RedisBoundedMap, reachable
from redis import exceptions as redis_errors

from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)

# How long an unanswered cancel request waits for its job's owner.
CANCEL_KEY_TTL_MS = 60_000
RESUBSCRIBE_DELAY_S = 0.5
RESUBSCRIBE_MAX_DELAY_S = 5.0
ADMISSIONS = {0: Admission.ADMITTED, 1: Admission.TOO_MANY_JOBS, 2: Admission.OVER_BUDGET}


class RedisJobBoard:
    """Job views, cancel requests and kept final objects in a shared Redis."""

    def __init__(
        self,
        client: aioredis.Redis,
        namespace: str,
        ephemeral_max_bytes: int,
        ephemeral_ttl_secs: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._clock = clock
        self._ns = f"{namespace}:jobs"
        self._channel = f"{self._ns}:cancel"
        self._index = [f"{self._ns}:index", f"{self._ns}:sizes"]
        self._admit = client.register_script(lua.ADMIT_JOB)
        self._post = client.register_script(lua.POST_JOB)
        self._kept = RedisBoundedMap(
            client,
            f"{namespace}:ephemeral",
            EPHEMERAL_MAX_ENTRIES,
            ephemeral_max_bytes,
            ephemeral_ttl_secs,
            clock=clock,
        )
        self._listener: asyncio.Task[None] | None = None

    def _active(self, response_id: str) -> str:
        return f"{self._ns}:active:{response_id}"

    def _cancel(self, response_id: str) -> str:
        return f"{self._ns}:cancel:{response_id}"

    def _claim(self, response_id: str) -> str:
        return f"{self._ns}:claim:{response_id}"

    def _answer(self, response_id: str) -> str:
        return f"{self._ns}:answer:{response_id}"

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def admit(
        self, view: pb.Response, nbytes: int, max_jobs: int, max_bytes: int, lease_secs: float
    ) -> Admission:
        keys = [*self._index, self._active(view.id)]
        args = [self._now_ms(), view.id, view.SerializeToString(), nbytes]
        args += [int(lease_secs * 1000), max_jobs, max_bytes]
        async with reachable():
            return ADMISSIONS[int(await self._admit(keys=keys, args=args))]

    async def post(self, view: pb.Response, lease_secs: float) -> None:
        keys = [*self._index, self._active(view.id)]
        args = [self._now_ms(), view.id, view.SerializeToString(), int(lease_secs * 1000)]
        async with reachable():
            await self._post(keys=keys, args=args)

    async def view(self, response_id: str) -> pb.Response | None:
        async with reachable():
            raw = await self._client.get(self._active(response_id))
        return pb.Response.FromString(raw) if raw is not None else None

    async def remove(self, response_id: str) -> None:
        index, sizes = self._index
        async with reachable(), self._client.pipeline(transaction=True) as pipe:
            pipe.delete(self._active(response_id), self._cancel(response_id))
            pipe.zrem(index, response_id)
            pipe.hdel(sizes, response_id)
            await pipe.execute()

    async def renew(self, response_ids: list[str], lease_secs: float) -> list[str]:
        if not response_ids:
            return []
        lease_ms = int(lease_secs * 1000)
        deadline = self._now_ms() + lease_ms
        async with reachable(), self._client.pipeline(transaction=False) as pipe:
            for rid in response_ids:
                pipe.pexpire(self._active(rid), lease_ms)
                # XX: a job whose lease already ran out stays out of the count (and of polls).
                pipe.zadd(self._index[0], {rid: deadline}, xx=True)
                pipe.exists(self._cancel(rid))
            replies: list[Any] = await pipe.execute()
        return [rid for rid, asked in zip(response_ids, replies[2::3], strict=True) if asked]

    async def request_cancel(self, response_id: str) -> None:
        async with reachable(), self._client.pipeline(transaction=True) as pipe:
            pipe.set(self._cancel(response_id), b"1", px=CANCEL_KEY_TTL_MS)
            pipe.publish(self._channel, response_id)
            await pipe.execute()

    async def listen(self, on_cancel: Callable[[str], None]) -> None:
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(on_cancel), name="job-cancels")

    async def _listen(self, on_cancel: Callable[[str], None]) -> None:
        delay = RESUBSCRIBE_DELAY_S
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                delay = RESUBSCRIBE_DELAY_S
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        on_cancel(bytes(message["data"]).decode())
            except (redis_errors.ConnectionError, redis_errors.TimeoutError) as exc:
                # Heartbeats see the cancel keys meanwhile; resubscribe once Redis is back.
                log.warning("job cancel subscription lost (%s); retrying in %.1f s", exc, delay)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESUBSCRIBE_MAX_DELAY_S)

    async def keep(self, final: pb.Response, nbytes: int) -> bool:
        return await self._kept.put(final.id, final.SerializeToString(), nbytes)

    async def kept(self, response_id: str) -> pb.Response | None:
        raw = await self._kept.get(response_id)
        return pb.Response.FromString(raw) if raw is not None else None

    async def forget(self, response_id: str) -> bool:
        return await self._kept.delete(response_id)

    async def claim(self, response_id: str, lease_secs: float) -> None:
        async with reachable():
            await self._client.set(self._claim(response_id), b"1", px=int(lease_secs * 1000))

    async def unclaim(self, response_id: str) -> None:
        async with reachable():
            await self._client.delete(self._claim(response_id), self._cancel(response_id))

    async def claimed(self, response_id: str) -> bool:
        async with reachable():
            return bool(await self._client.exists(self._claim(response_id)))

    async def renew_claims(self, response_ids: list[str], lease_secs: float) -> list[str]:
        if not response_ids:
            return []
        async with reachable(), self._client.pipeline(transaction=False) as pipe:
            for rid in response_ids:
                pipe.pexpire(self._claim(rid), int(lease_secs * 1000))
                pipe.exists(self._cancel(rid))
            replies: list[Any] = await pipe.execute()
        return [rid for rid, asked in zip(response_ids, replies[1::2], strict=True) if asked]

    async def answer(self, final: pb.Response) -> None:
        async with reachable():
            await self._client.set(
                self._answer(final.id), final.SerializeToString(), px=CANCEL_KEY_TTL_MS
            )

    async def answered(self, response_id: str) -> pb.Response | None:
        async with reachable():
            raw = await self._client.get(self._answer(response_id))
        return pb.Response.FromString(raw) if raw is not None else None

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
