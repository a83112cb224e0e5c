"""Streams the tool calls of one call span as function_call events while it is generated.

The end-of-span parse is authoritative: a call already streamed keeps its id and receives the
unsent rest of its arguments; calls the stream did not see are sent whole.
"""

from __future__ import annotations

import json

from mlx_responses.service.responses.events import EventAssembler
from mlx_responses.service.text.tool_formats import ParsedToolCall, Schemas, ToolFormat

from mlx_responses.v1 import events_pb2 as ev


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class ToolCallStreamer:
    """Follows one span at a time: `update` while it grows, `finish` once it is whole."""

    def __init__(self, fmt: ToolFormat, schemas: Schemas) -> None:
        self.format = fmt
        self.schemas = schemas
        self._reset()

    def _reset(self) -> None:
        self.opened = 0  # calls of this span whose item was added
        self.closed = 0  # calls of this span whose item is done
        self.sent = ""  # arguments sent for the open call

    @property
    def streaming(self) -> bool:
        """Whether a call of the current span has an open item."""
        return self.opened > self.closed

    def update(self, assembler: EventAssembler, body: str) -> list[ev.ResponseEvent]:
        """Events for what the growing span `body` now makes certain."""
        events: list[ev.ResponseEvent] = []
        calls = self.format.partial(body, self.schemas)
        for index, call in enumerate(calls):
            if index < self.closed:
                continue
            if index >= self.opened:
                events += assembler.function_call_start(call.name)
                self.opened, self.sent = index + 1, ""
            if call.arguments.startswith(self.sent):
                events += assembler.function_call_delta(call.arguments[len(self.sent) :])
                self.sent = call.arguments
            if call.complete and _is_json(call.arguments):
                events += assembler.function_call_done(call.arguments)
                self.closed = index + 1
            else:
                break
        return events

    def finish(self, assembler: EventAssembler, body: str) -> list[ev.ResponseEvent] | None:
        """The span's final events; None when nothing was streamed and it does not parse."""
        try:
            parsed: list[ParsedToolCall] = self.format.parse(body, self.schemas)
        except ValueError:
            parsed = []
        if not parsed and self.opened == 0:
            self._reset()
            return None
        events: list[ev.ResponseEvent] = []
        if self.streaming:
            index = self.opened - 1
            final = parsed[index].arguments if index < len(parsed) else self.sent
            events += assembler.function_call_done(final)
        for call in parsed[self.opened :]:
            events += assembler.function_call(call.name, call.arguments)
        self._reset()
        return events
