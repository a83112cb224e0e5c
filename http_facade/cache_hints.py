"""OpenAI's prompt-cache hints on a Responses or Chat body, as the core's cache breakpoints.

A content part with `prompt_cache_breakpoint: {"mode": "explicit", "ttl"?: "30m" | "12h"}`
ends a prefix the client expects to reuse (the SDK's `ResponseInputText` and its image and
file parts; Chat's content parts). The core renders the prompt up to it and, for a model whose
caches cannot be cut back, takes a prompt-cache entry there (service/text/cache_breakpoints.py);
the deepest four count, as OpenAI writes at most four per request.

NOTE: the breakpoint's `ttl` (checked), `prompt_cache_options` (`mode`, `ttl`) and
`prompt_cache_retention` are accepted and not acted on: entries live until the prompt cache's
LRU bounds evict them, and the system turn's end stays a checkpoint under `mode: explicit` too.
`prompt_cache_key` routes the request to a core (affinity.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.errors import invalid

from mlx_responses.v1 import responses_pb2 as pb

BREAKPOINT_TTLS = ("30m", "12h")
# The text a part adds to its message (service/text/prompt.py `_part_text`).
TEXT_FIELDS = {"input_text": "text", "output_text": "text", "text": "text", "refusal": "refusal"}


def check_breakpoint(value: Any, where: str) -> None:
    """A `prompt_cache_breakpoint` (`where`) is null or `{"mode": "explicit", "ttl"?}`."""
    if value is not None:
        _checked(value, where)


def _checked(value: Any, where: str) -> None:
    if not isinstance(value, dict) or value.get("mode") != "explicit":
        raise invalid(
            f'Invalid \'{where}\': expected {{"mode": "explicit"}}.', where, "invalid_value"
        )
    if value.get("ttl") is not None and value["ttl"] not in BREAKPOINT_TTLS:
        raise invalid(
            f"Invalid '{where}.ttl': expected 30m or 12h.", f"{where}.ttl", "invalid_value"
        )


def _marked(content: Any, where: str) -> list[int]:
    """The marked parts of a content array: each as its message's text length through it."""
    if not isinstance(content, list):
        return []
    marks, chars = [], 0
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            continue
        text = part.get(TEXT_FIELDS.get(str(part.get("type")), ""))
        chars += len(text) if isinstance(text, str) else 0
        mark = part.get("prompt_cache_breakpoint")
        if mark is not None:
            _checked(mark, f"{where}[{j}].prompt_cache_breakpoint")
            marks.append(chars)
    return marks


def _point(item: int, chars: int | None) -> pb.CacheBreakpoint:
    point = pb.InputPoint(item=item)
    if chars is not None:
        point.chars = chars
    return pb.CacheBreakpoint(input=point)


def input_breakpoints(value: Any) -> list[pb.CacheBreakpoint]:
    """The breakpoints of a (decoded, valid) Responses `input`: each after its message's text
    up to and including the marked part."""
    if not isinstance(value, list):
        return []
    return [
        _point(i, chars)
        for i, item in enumerate(value)
        if isinstance(item, dict)
        for chars in _marked(item.get("content"), f"input[{i}].content")
    ]


def chat_breakpoints(
    messages: list[Any], items_of: Callable[[list[Any]], list[pb.Item]]
) -> list[pb.CacheBreakpoint]:
    """The breakpoints of (decoded, valid) Chat `messages`, as points in their items
    (`items_of`, the decoder: a message may make several). A system, developer or user
    message is one message item (its parts' text joined); another (an assistant's, a tool's)
    is marked after all of its items."""
    breakpoints = []
    for i, message in enumerate(messages):
        marks = _marked(message.get("content"), f"messages[{i}].content")
        if not marks:
            continue
        start = len(items_of(messages[:i])) if i else 0
        end = len(items_of(messages[: i + 1]))
        if message.get("role") in ("system", "developer", "user"):
            breakpoints += [_point(start, chars) for chars in marks]
        elif end > start:  # an assistant turn with nothing to render makes no item
            breakpoints.append(_point(end - 1, None))
    return breakpoints
