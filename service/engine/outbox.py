"""Chunks on their way from the MLX thread to the asyncio loops, coalesced.

Two things keep the serving path's per-token cost off the decode loop:

- a coalescing window per stream: after a stream's first token (sent at once, for the time to
  first token), the tokens of later steps are merged into one chunk until `window` seconds have
  passed since the oldest one held, `max_tokens` are held, or the sequence finishes. When
  steps are fast (an accelerator, a small model) a stream's tokens leave a few at a time, as
  one event, one gRPC message, one SSE frame. When many streams decode, the window widens so
  that all of them together send about MAX_DELTAS_PER_SECOND deltas a second (up to
  MAX_WIDENED_WINDOW): a batch of 64 whose steps are slower than the window would otherwise hand
  the loop 64 deltas per step.
  The concatenation of a stream's chunks is the same either way.
- one wake-up per loop at a time: the engine thread appends to the loop's inbox and schedules
  a drain only when none is pending, so a loop that is behind picks up several steps' chunks in
  one go instead of one self-pipe write and one callback per step.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from mlx_responses.service.engine.requests import Chunk


class Receiver(Protocol):
    """The asyncio side of a stream: where its chunks end up (on its loop's thread)."""

    def deliver(self, chunk: Chunk) -> None: ...


R = TypeVar("R", bound=Receiver)

# A stream's chunk leaves once it holds this many tokens, whatever the window: bounds how
# bursty a fast stream looks. The window is what bounds latency; the cap binds only above
# 16 tokens per window (640 tokens/s per stream at the default 25 ms; 4 cost 5-8% tok/s on the
# micro benchmark against 16).
MAX_HELD_TOKENS = 16

# Delta events per second all streams together aim at (while the window is on): with more
# streams than `window × this` the window widens to `streams / this` (from the default 25 ms,
# above 10 streams: 80 ms at 32), so the loop's share of the process (a delta costs it a few
# hundred microseconds: event, gRPC, SSE, and as much again in the client) stays bounded when
# many streams each get a token per step. A/B on the micro model, two servers side by side (2
# CPU cores): against 1,000 a second, 8 streams +13% tok/s (16 of 24 pairs), 32 streams +7% (12
# of 12); one stream keeps its window (no change, 13 of 24). Earlier, 1,000 against none at 32
# streams: 3,783 -> 4,554 tok/s. The default window itself (--stream-window-ms 25, was 10)
# bounds one fast stream to 40 deltas a second: docs/performance.md, "One fast stream".
MAX_DELTAS_PER_SECOND = 400

# The widest the window widens to: past ~0.1 s between updates a stream reads as stalled. At 64
# streams 64 ms and 160 ms measured alike (4 of 8 pairs), so the cap costs nothing there.
MAX_WIDENED_WINDOW = 0.100


@dataclass
class _Held(Generic[R]):
    receiver: R
    loop: asyncio.AbstractEventLoop
    chunk: Chunk
    since: float


class _Inbox(Generic[R]):
    """One loop's pending deliveries; drained on that loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.items: list[tuple[R, Chunk]] = []
        self.scheduled = False


class Outbox(Generic[R]):
    """Owned by the engine thread: `put` each step's chunks, then `flush` once per step."""

    def __init__(self, window: float = 0.0, max_tokens: int = MAX_HELD_TOKENS) -> None:
        self.window = window
        self.max_tokens = max_tokens
        self.streams = 0  # streams decoding (the engine sets it each step)
        self._held: dict[int, _Held[R]] = {}
        self._started: set[int] = set()  # receivers whose first token has left
        self._inboxes: dict[asyncio.AbstractEventLoop, _Inbox[R]] = {}
        self._lock = threading.Lock()
        self.sent_chunks = 0  # chunks handed to loops (after coalescing)
        self.wakeups = 0  # drains scheduled on loops

    @property
    def effective_window(self) -> float:
        """The window, widened when many streams decode (0 stays 0: no coalescing)."""
        if self.window <= 0:
            return 0.0
        widened = min(self.streams / MAX_DELTAS_PER_SECOND, MAX_WIDENED_WINDOW)
        return max(self.window, widened)

    def put(self, receiver: R, loop: asyncio.AbstractEventLoop, chunk: Chunk, now: float) -> None:
        """Holds or sends `chunk`; a final chunk sends whatever the receiver has held."""
        window = self.effective_window
        key = id(receiver)
        held = self._held.pop(key, None)
        if held is not None:
            chunk = held.chunk.merged(chunk)
        since = held.since if held is not None else now
        first = key not in self._started and chunk.tokens > 0
        if (
            chunk.finish_reason is not None
            or first
            or window <= 0
            or now - since >= window
            or chunk.tokens >= self.max_tokens
        ):
            if chunk.finish_reason is not None:
                self._started.discard(key)
            elif chunk.tokens:
                self._started.add(key)
            self._send(receiver, loop, chunk)
        else:
            self._held[key] = _Held(receiver, loop, chunk, since)

    def flush(self, now: float) -> None:
        """Sends every held chunk whose window has passed (call once per engine step)."""
        window = self.effective_window
        for key, held in list(self._held.items()):
            if now - held.since >= window:
                del self._held[key]
                self._send(held.receiver, held.loop, held.chunk)

    def _send(self, receiver: R, loop: asyncio.AbstractEventLoop, chunk: Chunk) -> None:
        self.sent_chunks += 1
        with self._lock:
            inbox = self._inboxes.get(loop)
            if inbox is None:
                inbox = self._inboxes[loop] = _Inbox(loop)
            inbox.items.append((receiver, chunk))
            if inbox.scheduled:
                return
            inbox.scheduled = True
        self.wakeups += 1
        try:
            loop.call_soon_threadsafe(self._drainer(inbox))
        except RuntimeError:  # the loop is closed: nobody is left to read
            with self._lock:
                inbox.items.clear()
                inbox.scheduled = False

    def _drainer(self, inbox: _Inbox[R]) -> Callable[[], None]:
        def drain() -> None:
            with self._lock:
                items, inbox.items = inbox.items, []
                inbox.scheduled = False
            for receiver, chunk in items:
                receiver.deliver(chunk)

        return drain
