"""Bounds a chat template's rendering in time (templates run in Jinja's sandbox already).

transformers renders every chat template in `jinja2.sandbox.ImmutableSandboxedEnvironment`,
which refuses unsafe attribute access but not work: nested loops render for hours. Rendering
runs off the event loop (callers use a worker thread) and, here, under a deadline: a trace
function on the compiled template's own frames (Jinja compiles to Python code named
`<template>`) raises once the deadline passes, so a runaway loop stops at its next iteration.
Other frames are not traced, so the model's own template renders at full speed.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

# A real template renders a long conversation in milliseconds.
TEMPLATE_TIME_LIMIT_S = 5.0
JINJA_FILENAME = "<template>"


class TemplateTimeoutError(RuntimeError):
    """The chat template rendered past its deadline."""


@contextlib.contextmanager
def template_time_limit(seconds: float = TEMPLATE_TIME_LIMIT_S) -> Iterator[None]:
    """Raises TemplateTimeoutError inside a Jinja template still rendering after `seconds`."""
    deadline = time.monotonic() + seconds

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise TemplateTimeoutError(f"the chat template rendered for longer than {seconds:g} s")
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        return on_line if frame.f_code.co_filename == JINJA_FILENAME else None

    previous = sys.gettrace()
    sys.settrace(on_call)  # this thread only
    try:
        yield
    finally:
        sys.settrace(previous)
