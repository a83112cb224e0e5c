"""How an engine thread outlives its own failures (`worker.py` applies it).

An exception in the engine's loop (admitting, cancelling, a step, extracting a finished
sequence's cache) fails the requests the engine held in that pass, with a `server_error` that
says so (`restarted`); the scheduler and the prompt cache's memory tier are then built anew and
the next request is served. A prompt-cache read or write that fails fails no request: the read
is a miss (a cold prefill), the write is skipped, and the memory tier is built anew.

An engine that fails `limit` times within `window` seconds gives up (`Restarts.failed`): it
fails what it held and what waited (`stopped`) and tells its owner, which unloads the model and
reloads it on a request after a back-off (service/models/pool.py).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

# The failures within `WINDOW` seconds after which an engine gives up.
LIMIT = 3
WINDOW = 60.0


def restarted(exc: BaseException) -> str:
    """The error of a request failed by an engine failure that the engine survived."""
    return f"The engine failed and was restarted ({_named(exc)}); retry the request."


def stopped(reason: str) -> str:
    """The error of a request failed by an engine that gave up (its model is unloaded)."""
    return f"The engine failed repeatedly and was stopped ({reason}); retry the request."


def _named(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def ended(exc: BaseException) -> str:
    """Why an engine ended that could not rebuild what it runs on."""
    return f"the engine could not restart: {_named(exc)}"


def failure_reason(exc: BaseException, count: int, window: float) -> str:
    """Why an engine gave up: its failures and the last one's error."""
    return f"{count} engine failures within {window:g}s, the last {_named(exc)}"


@dataclass
class Restarts:
    """An engine's failures in the last `window` seconds; `failed` says when to give up."""

    limit: int = LIMIT
    window: float = WINDOW
    clock: Callable[[], float] = time.monotonic
    _times: deque[float] = field(default_factory=deque, repr=False)
    total: int = 0  # failures since the engine started

    def failed(self) -> bool:
        """Counts one failure; True when `limit` of them fell within `window` seconds."""
        now = self.clock()
        self.total += 1
        self._times.append(now)
        while self._times and self._times[0] < now - self.window:
            self._times.popleft()
        return len(self._times) >= self.limit

    @property
    def recent(self) -> int:
        """Failures within the window, as last counted."""
        return len(self._times)
