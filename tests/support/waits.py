"""Waiting for a state, not for a time: a test asserts what another thread, task or process
reaches, and polls for it until a deadline that only a hang misses (tens of seconds, however
loaded the machine), never a sleep it hopes is long enough."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE_S = 60.0  # a hang, not a slow machine
EVERY_S = 0.02


def until(
    condition: Callable[[], T], what: str, timeout: float = DEADLINE_S, every: float = EVERY_S
) -> T:
    """Polls `condition` until it returns something truthy, and returns that; fails saying
    `what` never held once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"never held within {timeout:.0f} s: {what}")
        time.sleep(every)
    return value


async def until_async(
    condition: Callable[[], T | Awaitable[T]],
    what: str,
    timeout: float = DEADLINE_S,
    every: float = EVERY_S,
) -> T:
    """`until` on an event loop (the loop runs on between polls); `condition` may be async."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"never held within {timeout:.0f} s: {what}")
        await asyncio.sleep(every)
