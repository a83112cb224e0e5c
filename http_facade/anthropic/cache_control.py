"""Anthropic's `cache_control` breakpoints, as the core's cache breakpoints.

A block (a system text block, a tool definition, a message's content block) with
`cache_control: {"type": "ephemeral", "ttl"?: "5m" | "1h"}` ends a prefix the client expects to
reuse; Claude Code marks its system prompt, its last tool and its latest messages. The core
renders the prompt up to each and, for a model whose caches cannot be cut back, takes a
prompt-cache entry there (service/text/cache_breakpoints.py). A top-level `cache_control`
(automatic caching) marks the last block.

A stated `ttl` is how long the entry at that block is kept after its last use (each use
refreshes it, as Anthropic's does); the core gives the request's other entries the lifetime of
the first marked block at or after their end (service/text/retention.py). A block without
a `ttl` leaves its entry to the prompt cache's LRU bounds (`--prompt-cache-max-entries`,
`--prompt-cache-max-bytes`, the disk tier's): Anthropic's five minutes are what it promises to
keep, and a local server keeping longer serves its client better. Anthropic refuses more than
four marked blocks; here the deepest four are taken (as OpenAI takes its breakpoints), the
core's bound.
"""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.kit.cache_hints import TTL_SECONDS, max_ttl
from mlx_responses.http_facade.kit.errors import invalid

TTLS = ("5m", "1h")


def marked(block: dict[str, Any], where: str) -> bool:
    """Whether `block` (the body itself: `where` empty) carries a `cache_control` breakpoint
    (checked; null: none). A tool_result's own text blocks may carry one: the result is then
    marked (its text renders as one)."""
    own = _checked(block.get("cache_control"), where)
    content = block.get("content")
    if block.get("type") != "tool_result" or not isinstance(content, list):
        return own
    inner = [
        _checked(b.get("cache_control"), f"{where}.content[{i}]")
        for i, b in enumerate(content)
        if isinstance(b, dict)
    ]
    return own or any(inner)


def _checked(value: Any, where: str) -> bool:
    if value is None:
        return False
    at = f"{where}.cache_control" if where else "cache_control"
    if not isinstance(value, dict) or value.get("type") != "ephemeral":
        raise invalid(f'Invalid \'{at}\': expected {{"type": "ephemeral"}}.', at, "invalid_value")
    if value.get("ttl") is not None and value["ttl"] not in TTLS:
        raise invalid(f"Invalid '{at}.ttl': expected 5m or 1h.", f"{at}.ttl", "invalid_value")
    return True


def ttl_of(block: dict[str, Any]) -> int | None:
    """The lifetime in seconds a marked (checked) block states: its own `ttl`, or for a
    tool_result the longest of its text blocks'; None where none is stated."""
    ttls = [_ttl(block.get("cache_control"))]
    content = block.get("content")
    if block.get("type") == "tool_result" and isinstance(content, list):
        ttls += [_ttl(b.get("cache_control")) for b in content if isinstance(b, dict)]
    return max_ttl(ttls)


def _ttl(value: Any) -> int | None:
    ttl = value.get("ttl") if isinstance(value, dict) else None
    return TTL_SECONDS[ttl] if isinstance(ttl, str) else None
