"""Streams the tool calls of one call span as function_call events while it is generated.

The end-of-span parse is authoritative: a call already streamed keeps its id and receives the
unsent rest of its arguments; calls the stream did not see are sent whole.
"""

from __future__ import annotations

from collections.abc import Collection

from mlx_responses.service.responses.events import EventAssembler
from mlx_responses.service.text.custom_input import input_of, partial_input
from mlx_responses.service.text.json_text import loads_bounded
from mlx_responses.service.text.tool_formats import ParsedToolCall, Schemas, ToolFormat

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb


def _is_json(text: str) -> bool:
    try:
        loads_bounded(text)
    except ValueError:
        return False
    return True


class ToolCallStreamer:
    """Follows one span at a time: `update` while it grows, `finish` once it is whole."""

    def __init__(self, fmt: ToolFormat, schemas: Schemas, custom: Collection[str] = ()) -> None:
        self.format = fmt
        self.schemas = schemas
        self.custom = custom  # custom tools: their input streams, not the arguments
        self._reset()

    def _payload(self, name: str, arguments: str, complete: bool) -> str:
        """What streams of a call: its arguments, or a custom tool's input."""
        if name not in self.custom:
            return arguments
        return input_of(arguments) if complete else partial_input(arguments)

    def _reset(self) -> None:
        self.opened = 0  # calls of this span whose item was added
        self.closed = 0  # calls of this span whose item is done
        self.sent = ""  # arguments sent for the open call

    @property
    def streaming(self) -> bool:
        """Whether a call of the current span has an open item."""
        return self.opened > self.closed

    def _known(self, name: str) -> bool:
        return name in self.schemas or name in self.custom

    def update(
        self, assembler: EventAssembler, body: str, *, bare: bool = False
    ) -> list[ev.ResponseEvent]:
        """Events for what the growing span `body` now makes certain.

        ``bare``: the model left out the span's opener; a call opens only once it is whole and
        names a tool of the request, so a guess that is not a call can still become text.
        """
        events: list[ev.ResponseEvent] = []
        calls = self.format.partial(body, self.schemas)
        for index, call in enumerate(calls):
            if index < self.closed:
                continue
            if index >= self.opened:
                if bare and not (call.complete and self._known(call.name)):
                    break
                events += assembler.function_call_start(call.name)
                self.opened, self.sent = index + 1, ""
            done = call.complete and _is_json(call.arguments)
            payload = self._payload(call.name, call.arguments, done)
            if payload.startswith(self.sent):
                events += assembler.function_call_delta(payload[len(self.sent) :])
                self.sent = payload
            if done:
                events += assembler.function_call_done(payload)
                self.closed = index + 1
            else:
                break
        return events

    def finish(
        self, assembler: EventAssembler, body: str, *, cut: bool = False, bare: bool = False
    ) -> list[ev.ResponseEvent] | None:
        """The span's final events; None when nothing was streamed and it does not parse.

        ``cut``: the output budget ended the span mid-call, so its last call is incomplete.
        ``bare``: the model left out the opener; unless every call names a tool of the request,
        the span is text.
        """
        try:
            parsed: list[ParsedToolCall] = self.format.parse(body, self.schemas)
        except ValueError:
            parsed = []
        if bare and not all(self._known(call.name) for call in parsed):
            parsed = []
        if not parsed and self.opened == 0:
            self._reset()
            return None
        events: list[ev.ResponseEvent] = []
        rest = parsed[self.opened :]
        if self.streaming:
            index = self.opened - 1
            final = self.sent
            if index < len(parsed):
                final = self._payload(parsed[index].name, parsed[index].arguments, True)
            status = pb.ITEM_STATUS_INCOMPLETE if cut and not rest else pb.ITEM_STATUS_COMPLETED
            events += assembler.function_call_done(final, status)
        for i, call in enumerate(rest):
            last = i == len(rest) - 1
            status = pb.ITEM_STATUS_INCOMPLETE if cut and last else pb.ITEM_STATUS_COMPLETED
            payload = self._payload(call.name, call.arguments, True)
            events += assembler.function_call(call.name, payload, status)
        self._reset()
        return events
