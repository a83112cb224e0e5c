"""Renders Responses events as SSE frames, each whole frame in one write."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mlx_responses.http_facade.from_proto import event_to_json

from mlx_responses.v1 import events_pb2 as ev

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


def frames(events: Iterable[ev.ResponseEvent]) -> bytes:
    """Whole frames of a batch of events, to be written together."""
    return b"".join(frame(event_to_json(e)) for e in events)


def data_frame(payload: dict[str, Any] | str) -> bytes:
    """A `data:`-only frame (Chat Completions style); a string goes as is (`[DONE]`)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()
