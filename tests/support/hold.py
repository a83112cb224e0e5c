"""Holding an engine until a burst has arrived, so a test of batching asserts the batch formed
because the requests were there together, not because they happened to arrive in time."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from mlx_responses.service.engine.commands import Cancel


@contextlib.contextmanager
def held_until(worker: Any, n: int, deadline_s: float = 120.0) -> Iterator[None]:
    """While inside: the idle engine `worker`'s next read of its queue waits until `n`
    requests wait in it, so they are admitted in one pass; later reads are as ever (the hold is
    taken once, so a stop sent after the burst is never held). The thread, blocked on an empty
    queue, is woken by a cancel of nothing (a no-op) so that its next read is the held one."""
    original = worker._next_commands

    def gathered(*, busy: bool, stream: Any = None) -> Any:
        worker._next_commands = original
        if not busy:
            end = time.monotonic() + deadline_s
            while worker._commands.qsize() < n and time.monotonic() < end:
                time.sleep(0.005)
        return original(busy=busy, stream=stream)

    worker._next_commands = gathered
    worker._commands.put(Cancel(stream=object()))  # type: ignore[arg-type]
    try:
        yield
    finally:
        worker._next_commands = original
