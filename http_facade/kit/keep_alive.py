"""Ollama's `keep_alive`, taken on every generation surface (Responses, Chat Completions,
Completions, Anthropic Messages) and by `POST /v1/models/{model}/load`: how long the model stays
loaded once idle after the request. A number of seconds or a duration string ("5m", "1h30m");
negative keeps it loaded for good, 0 unloads it once idle. Anything else is a 400 naming it."""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.service.flags import KEEP_ALIVE_PATTERN, keep_alive_seconds

from mlx_responses.v1 import responses_pb2 as pb

# The OpenAPI schema of the field (every surface's request documents it so).
KEEP_ALIVE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number"},
        {"type": "string", "pattern": KEEP_ALIVE_PATTERN},
        {"type": "null"},
    ],
    "description": "Seconds, or a duration such as '5m' or '1h', the model stays loaded once "
    "idle after this request; negative: for good; 0: unloaded once idle. Default: the "
    "server's --keep-alive (5m).",
}


def keep_alive_from(body: dict[str, Any]) -> float | None:
    """The body's `keep_alive` in seconds (negative: for good); None when absent or null."""
    value = body.get("keep_alive")
    if value is None:
        return None
    try:
        return keep_alive_seconds(value)
    except ValueError as exc:
        raise invalid(f"Invalid 'keep_alive': {exc}.", "keep_alive", "invalid_value") from exc


def read_keep_alive(body: dict[str, Any], params: pb.CreateResponseParams) -> None:
    """Sets `params.keep_alive_seconds` from the body's `keep_alive`, when it gives one."""
    seconds = keep_alive_from(body)
    if seconds is not None:
        params.keep_alive_seconds = seconds
