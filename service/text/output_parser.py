"""Splits generated text, as it streams, into reasoning, answer text and tool-call spans."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Channel(enum.Enum):
    """Where a span of generated text belongs."""

    REASONING = "reasoning"
    TEXT = "text"
    TOOL_CALL = "tool_call"
    # A message ended (harmony): the open output item closes, the next text opens another.
    BOUNDARY = "boundary"


@dataclass(frozen=True)
class Markers:
    """The control strings of a model's output format."""

    think_start: str | None = "<think>"
    think_end: str | None = "</think>"
    tool_start: str | None = "<tool_call>"
    tool_end: str | None = "</tool_call>"  # None: a call runs to the end of generation
    # Opens a call only as the very start of the answer, and belongs to the call (Llama 3 `{`).
    tool_leading: str | None = None
    # Opens a call anywhere in the answer when the model left out `tool_start`, and belongs to
    # the call (Qwen3-Coder's `<function=`): the span is marked `bare`, a guess to be confirmed.
    tool_bare: str | None = None


@dataclass(frozen=True)
class Segment:
    """Text of one channel. A TOOL_CALL segment is one whole call body."""

    channel: Channel
    text: str
    # A TOOL_CALL span: the markers generated around `text` (not part of it), and whether it was
    # opened by `tool_bare` (the model left out its opener).
    opener: str = ""
    closer: str = ""
    bare: bool = False


class OutputParser:
    """Incremental splitter; holds back text that may be the start of a marker."""

    def __init__(self, markers: Markers, *, in_reasoning: bool = False) -> None:
        self._markers = markers
        self._channel = Channel.REASONING if in_reasoning else Channel.TEXT
        self._buffer = ""
        self._tool_body = ""
        # Just after a reasoning block or a call, templates put blank lines.
        self._strip_leading = False
        self._answered = False  # answer text was emitted (a leading call is no longer possible)
        self._opener = ""  # the marker that opened the open call span, when not part of its body
        self._bare = False  # the open call span was opened by `tool_bare`

    @property
    def partial_tool_body(self) -> str:
        """The body of the open tool call so far (text that may start the end marker excluded)."""
        return self._tool_body if self._channel is Channel.TOOL_CALL else ""

    @property
    def bare_span(self) -> bool:
        """Whether the open tool call was opened by `tool_bare` (its opener left out)."""
        return self._bare and self._channel is Channel.TOOL_CALL

    @property
    def channel(self) -> Channel:
        """The channel generated text currently flows into."""
        return self._channel

    def _transitions(self) -> list[tuple[str, Channel]]:
        m = self._markers
        if self._channel is Channel.REASONING:
            return [(m.think_end, Channel.TEXT)] if m.think_end else []
        if self._channel is Channel.TOOL_CALL:
            return [(m.tool_end, Channel.TEXT)] if m.tool_end else []
        out: list[tuple[str, Channel]] = []
        if m.think_start:
            out.append((m.think_start, Channel.REASONING))
        if m.tool_start:
            out.append((m.tool_start, Channel.TOOL_CALL))
        if m.tool_bare:
            out.append((m.tool_bare, Channel.TOOL_CALL))
        return out

    def _emit(self, text: str, out: list[Segment]) -> None:
        if self._channel is Channel.TOOL_CALL:
            self._tool_body += text
            return
        if self._strip_leading and self._channel is Channel.TEXT:
            text = text.lstrip()
            if text:
                self._strip_leading = False
        if text:
            self._answered = self._answered or self._channel is Channel.TEXT
            if out and out[-1].channel is self._channel:
                out[-1] = Segment(self._channel, out[-1].text + text)
            else:
                out.append(Segment(self._channel, text))

    def feed(self, text: str) -> list[Segment]:
        """Consumes generated text; returns the segments now known to be safe."""
        self._buffer += text
        out: list[Segment] = []
        while self._buffer:
            if self._leading_pending():
                head = self._buffer.lstrip()
                leading = self._markers.tool_leading or ""
                if not head or (leading.startswith(head) and head != leading):
                    break  # blanks or a part of the leading marker: wait for more
                if head.startswith(leading):
                    self._buffer = head
                    self._switch(Channel.TOOL_CALL, out, "")
                    continue
            transitions = self._transitions()
            hit = min(
                ((self._buffer.find(s), s, c) for s, c in transitions if s in self._buffer),
                default=None,
                key=lambda t: t[0],
            )
            if hit is not None:
                index, marker, target = hit
                self._emit(self._buffer[:index], out)
                bare = self._channel is Channel.TEXT and marker == self._markers.tool_bare
                # A bare opener belongs to the call's body: it stays in the buffer.
                self._buffer = self._buffer[index if bare else index + len(marker) :]
                self._switch(target, out, marker, bare=bare)
                continue
            # Keep back the longest tail that could begin a marker.
            keep = 0
            for marker, _ in transitions:
                for n in range(min(len(marker) - 1, len(self._buffer)), 0, -1):
                    if self._buffer.endswith(marker[:n]):
                        keep = max(keep, n)
                        break
            safe = self._buffer[: len(self._buffer) - keep] if keep else self._buffer
            self._emit(safe, out)
            self._buffer = self._buffer[len(safe) :]
            break
        return out

    def _leading_pending(self) -> bool:
        return (
            self._markers.tool_leading is not None
            and self._channel is Channel.TEXT
            and not self._answered
        )

    def _switch(
        self, target: Channel, out: list[Segment], marker: str = "", *, bare: bool = False
    ) -> None:
        """Moves to `target` on `marker` (written, not part of either channel's text)."""
        previous = self._channel
        if previous is Channel.TOOL_CALL:
            out.append(self._call(closer=marker))
        if target is Channel.TOOL_CALL:
            self._opener, self._bare = ("" if bare else marker), bare
        self._channel = target
        if previous is not Channel.TEXT and target is Channel.TEXT:
            # Templates put blank lines after a reasoning block and between tool calls.
            self._strip_leading = True
        if target is Channel.REASONING:
            self._strip_leading = False

    def finish(self) -> list[Segment]:
        """Flushes what was held back; an unterminated tool call is returned as one."""
        out: list[Segment] = []
        self._emit(self._buffer, out)
        self._buffer = ""
        if self._channel is Channel.TOOL_CALL:
            out.append(self._call(closer=""))
            self._channel = Channel.TEXT
        return out

    def _call(self, *, closer: str) -> Segment:
        """The open call span as one segment; the parser is ready for the next span."""
        segment = Segment(Channel.TOOL_CALL, self._tool_body, self._opener, closer, self._bare)
        self._tool_body, self._opener, self._bare = "", "", False
        return segment
