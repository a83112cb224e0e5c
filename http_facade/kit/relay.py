"""Core calls of one HTTP request that asks for several choices (`n`), run side by side.

The engine batches the concurrent sequences; each choice is its own core call, so a choice is
cancelled, drained at shutdown and counted exactly as a Responses turn is.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Awaitable, Iterable
from typing import TypeVar

from aiohttp import web
from mlx_responses.http_facade.kit.client import CoreClient, CoreEventStream
from mlx_responses.http_facade.kit.drain import STREAMS
from mlx_responses.service.fan_out import fan_out_value

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

T = TypeVar("T")
Batch = list[ev.ResponseEvent]


def choice_params(params: pb.CreateResponseParams, n: int) -> list[pb.CreateResponseParams]:
    """One request per choice; a seeded request gives choice i the seed + i (all reproducible)."""
    copies = []
    for index in range(n):
        copy = pb.CreateResponseParams()
        copy.CopyFrom(params)
        if index and params.HasField("seed"):
            copy.seed = (params.seed + index + 2**63) % 2**64 - 2**63
        copies.append(copy)
    return copies


def fan_out(params: list[pb.CreateResponseParams]) -> str | None:
    """The group the calls of one request's choices carry, so the core admits them as one
    unit (service/fan_out.py); None for a lone call."""
    return fan_out_value(uuid.uuid4().hex, len(params)) if len(params) > 1 else None


async def gather_all(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Every result in order; the first failure cancels the others and is raised."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()


async def create_all(
    client: CoreClient, params: list[pb.CreateResponseParams]
) -> list[pb.Response]:
    """Whole responses, one per choice."""
    group = fan_out(params)
    return await gather_all(client.create(p, group) for p in params)


class ChoiceStreams:
    """The StreamResponse calls of a request's choices; refusals surface in `open()`."""

    def __init__(self, client: CoreClient, params: list[pb.CreateResponseParams]) -> None:
        self.client = client
        group = fan_out(params)
        self.streams: list[CoreEventStream] = [client.stream(p, group) for p in params]
        self.firsts: list[Batch] = []

    async def open(self) -> None:
        """Awaits every first batch, so a refusal (400, 404, 503) is a plain HTTP error."""
        self.firsts = await gather_all(s.first() for s in self.streams)

    def cancel(self) -> None:
        for stream in self.streams:
            stream.cancel()

    async def events(self, request: web.Request) -> AsyncGenerator[tuple[int, Batch], None]:
        """(choice index, batch) as they come, every choice tracked for the shutdown drain."""
        queue: asyncio.Queue[tuple[int, Batch | Exception | None]] = asyncio.Queue()

        async def pump(index: int, stream: CoreEventStream) -> None:
            try:
                async for batch in stream.rest():
                    await queue.put((index, batch))
            except Exception as exc:  # an OpenAIError of a broken core call
                await queue.put((index, exc))
                return
            await queue.put((index, None))

        with contextlib.ExitStack() as tracking:
            for index, first in enumerate(self.firsts):
                snapshot = next(
                    (e.snapshot.response for e in first if e.HasField("snapshot")), None
                )
                if snapshot is not None:
                    tracking.enter_context(
                        request.app[STREAMS].track(snapshot.id, self.client, self.streams[index])
                    )
                yield index, first
            tasks = [asyncio.ensure_future(pump(i, s)) for i, s in enumerate(self.streams)]
            try:
                running = len(tasks)
                while running:
                    index, item = await queue.get()
                    if item is None:
                        running -= 1
                    elif isinstance(item, Exception):
                        raise item
                    else:
                        yield index, item
            finally:
                for task in tasks:
                    task.cancel()
