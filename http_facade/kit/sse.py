"""Server-sent events: the headers, each payload as one whole frame, and the one writer of
every dialect's stream (`write_stream`)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any, Protocol

from aiohttp import web
from mlx_responses.http_facade.kit.errors import OpenAIError

from mlx_responses.v1 import events_pb2 as ev

log = logging.getLogger(__name__)

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}


def frame(payload: dict[str, Any]) -> bytes:
    """`event: <type>` and one-line `data:` JSON; ensure_ascii keeps it one line."""
    data = json.dumps(payload, separators=(",", ":"))
    return f"event: {payload['type']}\ndata: {data}\n\n".encode()


def data_frame(payload: dict[str, Any] | str) -> bytes:
    """A `data:`-only frame (Chat Completions style); a string goes as is (`[DONE]`)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


class Frames(Protocol):
    """What one dialect's stream writes: its frames for each core event, before and after."""

    def head(self) -> bytes:
        """Frames before the first event (empty for most)."""
        ...

    def frames(self, index: int, event: ev.ResponseEvent) -> bytes:
        """The frames of one event of choice `index`."""
        ...

    def tail(self) -> bytes:
        """Frames after every choice ended (usage, `[DONE]`)."""
        ...

    def broken(self, error: OpenAIError) -> bytes:
        """The frame a stream the core broke off ends with."""
        ...


async def write_stream(
    request: web.Request,
    events: AsyncGenerator[tuple[int, list[ev.ResponseEvent]], None],
    render: Frames,
) -> web.StreamResponse:
    """THE server-sent event writer: each batch of core events as the dialect's frames, in one
    write; a stream the core breaks off ends with the dialect's error frame."""
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    head = render.head()
    if head:
        await response.write(head)
    try:
        async with contextlib.aclosing(events):
            async for index, batch in events:
                await response.write(b"".join(render.frames(index, e) for e in batch))
    except OpenAIError as error:
        log.error("%s stream broke: %s", request.path, error.message)
        await response.write(render.broken(error))
    else:
        await response.write(render.tail())
    await response.write_eof()
    return response
