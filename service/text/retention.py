"""How long prompt-cache entries are kept: the clients' lifetimes, refreshed on use.

Clients say how long a cached prefix should live: Anthropic's `cache_control.ttl` ("5m", "1h")
on a marked block, OpenAI's `prompt_cache_breakpoint.ttl` and `prompt_cache_options.ttl`
("30m", "12h"), bounded by `prompt_cache_retention` ("in_memory": an hour and never on disk,
"24h": a day). An entry written under one carries an expiry, `ttl` seconds after its last use:
each use (a hit that serves a prompt) moves it on, as Anthropic's cache does. An expired entry is
never served, and is removed from memory and from the disk tier.

An entry written without any (no ttl stated, no retention) has no expiry: it lives until the
prompt cache's bounds (entries, bytes, the disk's budget) evict it, least recently used first,
as before. An entry written again takes the latest request's lifetime.

Which lifetime an entry takes (`Retention.ttl`): an entry holds the prompt up to its end, so it
lives as the first marked block at or after that end asks (its checkpoint, or the system turn
just before a marked system prompt); an entry past every marked block (the finished turn's) as
the deepest marked block, or, where the cache is one entry holding every marked prefix (caches
that can be trimmed back: the latest turn replaces its prefixes), as the longest-lived of them.
A marked block that states no ttl takes the request's (`prompt_cache_options.ttl`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def longest(ttls: Sequence[float | None]) -> float | None:
    """The longest of lifetimes where None is no expiry (the longest of all)."""
    return None if not ttls or None in ttls else max(t for t in ttls if t is not None)


@dataclass(frozen=True)
class Retention:
    """The lifetimes of the prompt-cache entries one request writes."""

    # (position in the prompt, seconds or None) of each marked block found, by position.
    points: tuple[tuple[int, float | None], ...] = ()
    # Seconds for an entry past every point (None: no expiry).
    tail: float | None = None
    # `prompt_cache_retention: "in_memory"`: never written to the disk tier.
    memory_only: bool = False

    @classmethod
    def of(
        cls,
        request_ttl: float | None,
        marks: Sequence[tuple[int | None, float | None]],
        *,
        merged: bool,
        memory_only: bool = False,
    ) -> Retention:
        """A request's retention: `request_ttl` (None: none stated), its marked blocks as
        (position, own ttl) in request depth order (position None: not found in the prompt),
        `merged`: the cache keeps one entry holding every marked prefix (trimmable caches)."""
        resolved = [(p, request_ttl if t is None else t) for p, t in marks]
        points = tuple(sorted((p, t) for p, t in resolved if p is not None))
        if not resolved:
            tail = request_ttl
        elif merged:
            tail = longest([t for _, t in resolved])
        else:
            tail = resolved[-1][1]
        return cls(points, tail, memory_only)

    @property
    def bounded(self) -> bool:
        """Whether any entry this request writes expires."""
        return self.tail is not None or any(t is not None for _, t in self.points)

    def ttl(self, end: int) -> float | None:
        """Seconds an entry holding the prompt's first `end` tokens is kept after its last use."""
        for position, ttl in self.points:
            if position >= end:
                return ttl
        return self.tail


UNBOUNDED = Retention()
