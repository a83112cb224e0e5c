"""Server-sent events: the headers, and each payload as one whole frame (one write)."""

from __future__ import annotations

import json
from typing import Any

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
