"""OpenAI's prompt-cache hints on a Responses or Chat body, as the core's cache breakpoints.

A content part with `prompt_cache_breakpoint: {"mode": "explicit", "ttl"?: "30m" | "12h"}`
ends a prefix the client expects to reuse (the SDK's `ResponseInputText` and its image and
file parts; Chat's content parts). The core renders the prompt up to it and, for a model whose
caches cannot be cut back, takes a prompt-cache entry there (service/text/cache_breakpoints.py);
the deepest four count, as OpenAI writes at most four per request.

Lifetimes. A stated `ttl` (a breakpoint's, else `prompt_cache_options.ttl`) is how long the
entries the request writes are kept after their last use (a use refreshes it);
`prompt_cache_retention` bounds every one of them: `in_memory` at an hour, and never written
to the disk tier (OpenAI keeps such caches in volatile memory, removed within an hour), `24h` at
a day. A request naming none of these leaves its entries to the prompt cache's LRU bounds.
`prompt_cache_options.mode` is accepted and not acted on (the system turn's end stays a
checkpoint under `mode: explicit` too), as are `prewarm` and `comparison_response_id`.
`prompt_cache_key` routes the request to a core (affinity.py) and names the prefix its
requests share (the core checkpoints where they part: service/text/key_prefixes.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.fields import Field
from mlx_responses.http_facade.kit.openapi import BOOLEAN, OPT_STRING, nullable, obj

from mlx_responses.v1 import responses_pb2 as pb

BREAKPOINT_TTLS = ("30m", "12h")
# The lifetimes a client may name (OpenAI's and Anthropic's), in seconds.
TTL_SECONDS = {"5m": 300, "30m": 1800, "1h": 3600, "12h": 43200}
# `prompt_cache_retention`: the longest an entry is kept after its last use.
RETENTIONS = {"in_memory": 3600, "24h": 86400}
PROMPT_CACHE_MODES = ("implicit", "explicit")
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


def _marked(content: Any, where: str) -> list[tuple[int, int | None]]:
    """The marked parts of a content array: each as its message's text length through it, and
    its ttl in seconds (None: none stated)."""
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
            marks.append((chars, _seconds(mark.get("ttl"))))
    return marks


def _seconds(ttl: Any) -> int | None:
    return TTL_SECONDS[ttl] if isinstance(ttl, str) else None


def input_point(item: int, chars: int | None = None, ttl: int | None = None) -> pb.CacheBreakpoint:
    """After `input[item]` (after its first `chars` characters of text, for a message); `ttl`:
    its entry's lifetime in seconds, if stated."""
    point = pb.InputPoint(item=item)
    if chars is not None:
        point.chars = chars
    mark = pb.CacheBreakpoint(input=point)
    if ttl is not None:
        mark.ttl_seconds = ttl
    return mark


def input_breakpoints(value: Any) -> list[pb.CacheBreakpoint]:
    """The breakpoints of a (decoded, valid) Responses `input`: each after its message's text
    up to and including the marked part."""
    if not isinstance(value, list):
        return []
    return [
        input_point(i, chars, ttl)
        for i, item in enumerate(value)
        if isinstance(item, dict)
        for chars, ttl in _marked(item.get("content"), f"input[{i}].content")
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
            breakpoints += [input_point(start, chars, ttl) for chars, ttl in marks]
        elif end > start:  # an assistant turn with nothing to render makes no item
            breakpoints.append(input_point(end - 1, None, max_ttl([ttl for _, ttl in marks])))
    return breakpoints


def max_ttl(ttls: list[int | None]) -> int | None:
    """The longest of the lifetimes stated (None: none was)."""
    stated = [t for t in ttls if t is not None]
    return max(stated) if stated else None


def lifetimes(body: dict[str, Any], params: pb.CreateResponseParams) -> None:
    """Sets how long the request's prompt-cache entries are kept from its
    `prompt_cache_options.ttl` and `prompt_cache_retention` (checked), the latter bounding
    every lifetime (the breakpoints' too) and, for `in_memory`, keeping them off the disk."""
    ttl: int | None = None
    options = body.get("prompt_cache_options")
    if options is not None:
        if not isinstance(options, dict):
            raise invalid(
                "Invalid type for 'prompt_cache_options': expected an object.",
                "prompt_cache_options",
                "invalid_type",
            )
        mode = options.get("mode")
        if mode is not None and mode not in PROMPT_CACHE_MODES:
            raise invalid(
                "Invalid 'prompt_cache_options.mode': expected implicit or explicit.",
                "prompt_cache_options.mode",
                "invalid_value",
            )
        if options.get("ttl") is not None:
            if options["ttl"] not in BREAKPOINT_TTLS:
                raise invalid(
                    "Invalid 'prompt_cache_options.ttl': expected 30m or 12h.",
                    "prompt_cache_options.ttl",
                    "invalid_value",
                )
            ttl = TTL_SECONDS[options["ttl"]]
    retention = body.get("prompt_cache_retention")
    bound: int | None = None
    if retention is not None:
        if not isinstance(retention, str) or retention not in RETENTIONS:
            raise invalid(
                "Invalid 'prompt_cache_retention': expected in_memory or 24h.",
                "prompt_cache_retention",
                "invalid_value",
            )
        bound = RETENTIONS[retention]
        params.prompt_cache_memory_only = retention == "in_memory"
        ttl = bound if ttl is None else min(ttl, bound)
        for mark in params.cache_breakpoints:
            if mark.HasField("ttl_seconds"):
                mark.ttl_seconds = min(mark.ttl_seconds, bound)
    if ttl is not None:
        params.prompt_cache_ttl_seconds = ttl


# `prompt_cache_retention` and `prompt_cache_options` (Responses and Chat), read by `lifetimes`.
LIFETIME_FIELDS = (
    Field(
        "prompt_cache_retention",
        "retention",
        "The longest a prompt-cache entry of this request is kept after its last use.",
        schema={"enum": list(RETENTIONS)},
    ),
    Field(
        "prompt_cache_options",
        "object",
        "`ttl`: how long this request's prompt-cache entries are kept after their last use.",
        schema=obj(
            mode=nullable({"enum": list(PROMPT_CACHE_MODES)}),
            ttl=nullable({"enum": list(BREAKPOINT_TTLS)}),
            prewarm=nullable(BOOLEAN),
            comparison_response_id=OPT_STRING,
        ),
    ),
)
