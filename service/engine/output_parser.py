"""Splits generated text, as it streams, into reasoning, answer text and tool-call spans."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Channel(enum.Enum):
    """Where a span of generated text belongs."""

    REASONING = "reasoning"
    TEXT = "text"
    TOOL_CALL = "tool_call"


@dataclass(frozen=True)
class Markers:
    """The control strings of a model's output format."""

    think_start: str | None = "<think>"
    think_end: str | None = "</think>"
    tool_start: str | None = "<tool_call>"
    tool_end: str | None = "</tool_call>"


@dataclass(frozen=True)
class Segment:
    """Text of one channel. A TOOL_CALL segment is one whole call body."""

    channel: Channel
    text: str


class OutputParser:
    """Incremental splitter; holds back text that may be the start of a marker."""

    def __init__(self, markers: Markers, *, in_reasoning: bool = False) -> None:
        self._markers = markers
        self._channel = Channel.REASONING if in_reasoning else Channel.TEXT
        self._buffer = ""
        self._tool_body = ""
        # Just after a reasoning block, templates put blank lines before the answer.
        self._strip_leading = False

    @property
    def partial_tool_body(self) -> str:
        """The body of the open tool call so far (text that may start the end marker excluded)."""
        return self._tool_body if self._channel is Channel.TOOL_CALL else ""

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
        return out

    def _emit(self, text: str, out: list[Segment]) -> None:
        if self._channel is Channel.TOOL_CALL:
            self._tool_body += text
            return
        if self._strip_leading and self._channel is Channel.TEXT:
            text = text.lstrip("\n")
            if text:
                self._strip_leading = False
        if text:
            if out and out[-1].channel is self._channel:
                out[-1] = Segment(self._channel, out[-1].text + text)
            else:
                out.append(Segment(self._channel, text))

    def feed(self, text: str) -> list[Segment]:
        """Consumes generated text; returns the segments now known to be safe."""
        self._buffer += text
        out: list[Segment] = []
        while self._buffer:
            transitions = self._transitions()
            hit = min(
                ((self._buffer.find(s), s, c) for s, c in transitions if s in self._buffer),
                default=None,
                key=lambda t: t[0],
            )
            if hit is not None:
                index, marker, target = hit
                self._emit(self._buffer[:index], out)
                self._buffer = self._buffer[index + len(marker) :]
                self._switch(target, out)
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

    def _switch(self, target: Channel, out: list[Segment]) -> None:
        previous = self._channel
        if previous is Channel.TOOL_CALL:
            out.append(Segment(Channel.TOOL_CALL, self._tool_body))
            self._tool_body = ""
        self._channel = target
        if previous is Channel.REASONING and target is Channel.TEXT:
            self._strip_leading = True
        if target is Channel.REASONING:
            self._strip_leading = False

    def finish(self) -> list[Segment]:
        """Flushes what was held back; an unterminated tool call is returned as one."""
        out: list[Segment] = []
        self._emit(self._buffer, out)
        self._buffer = ""
        if self._channel is Channel.TOOL_CALL:
            out.append(Segment(Channel.TOOL_CALL, self._tool_body))
            self._tool_body = ""
            self._channel = Channel.TEXT
        return out


@dataclass(frozen=True)
class ParsedToolCall:
    """A tool call parsed from a call body."""

    name: str
    arguments: str


ToolBodyParser = Callable[[str, Any], Any]


def parse_tool_call(body: str, parser: ToolBodyParser | None = None) -> ParsedToolCall | None:
    """Parses a Hermes/Qwen JSON body (or uses the tokenizer's own parser); None if malformed."""
    try:
        data = parser(body, None) if parser is not None else json.loads(body.strip())
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    arguments = data.get("arguments", {})
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ParsedToolCall(name=data["name"], arguments=text)


HERMES_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*')


class HermesArgumentStreamer:
    """Follows a Hermes/Qwen `{"name": ..., "arguments": {...}}` body while it is generated.

    `update` returns the name once it is known, then the new text of the arguments object; the
    closing brace of the outer object (and trailing blanks) is held back until the call ends.
    """

    def __init__(self) -> None:
        self.name: str | None = None
        self.sent = ""

    def reset(self) -> None:
        """Ready for the next call."""
        self.name = None
        self.sent = ""

    def update(self, body: str) -> tuple[str | None, str]:
        """(name if it just became known, arguments text not yet sent)."""
        match = HERMES_HEAD.match(body)
        if match is None:
            return None, ""
        new_name = None
        if self.name is None:
            self.name = json.loads(f'"{match.group(1)}"')
            new_name = self.name
        safe = body[match.end() :].rstrip()
        safe = safe[:-1].rstrip() if safe.endswith("}") else safe
        if not safe.startswith(self.sent):
            return new_name, ""
        delta = safe[len(self.sent) :]
        self.sent = safe
        return new_name, delta

    def final_arguments(self, body: str, parsed: ParsedToolCall) -> str:
        """The arguments as generated when they are the parsed ones, else the parser's text."""
        match = HERMES_HEAD.match(body)
        if match is not None:
            raw = body[match.end() :].rstrip()
            raw = raw[:-1].rstrip() if raw.endswith("}") else raw
            try:
                if json.loads(raw) == json.loads(parsed.arguments):
                    return raw
            except ValueError:
                pass
        return parsed.arguments
