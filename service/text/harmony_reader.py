"""Reads a harmony turn as it is generated, token by token, into the pipeline's segments.

The control tokens are told by id (service/text/harmony.py), so text never passes for one;
everything between them is decoded with the model's tokenizer. Per message:

- `analysis` without a recipient: REASONING;
- `final`, or `commentary` without a recipient (a preamble): TEXT;
- a recipient `functions.NAME` naming an offered function, on any channel: a TOOL_CALL span
  (`HarmonyFormat.span`), streamed while its arguments grow;
- any other recipient (`browser.search`, `python`, an undeclared function): nothing at all.

A BOUNDARY segment ends each message, so that every message is its own output item. The reader
has OutputParser's shape (`feed`, `finish`, `channel`, `partial_tool_body`, `bare_span`), fed
token ids instead of text.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from typing import Any

from mlx_responses.service.text.harmony import (
    HarmonyFormat,
    HarmonyTokens,
    Header,
    hugging_face,
)
from mlx_responses.service.text.output_parser import Channel, Segment

REPLACEMENT = "\ufffd"  # a decoded byte sequence cut inside a character


class _Part(enum.Enum):
    ROLE = 0
    CHANNEL = 1
    CONSTRAIN = 2


class _Kind(enum.Enum):
    REASONING = "reasoning"
    TEXT = "text"
    CALL = "call"
    DROPPED = "dropped"


class HarmonyReader:
    """Incremental reader of one assistant turn; the prompt ended with `<|start|>assistant`."""

    def __init__(self, tokens: HarmonyTokens, tokenizer: Any, functions: Collection[str]) -> None:
        self._t = tokens
        self._tokenizer = hugging_face(tokenizer)
        self._functions = functions  # the offered functions' names: the only callable ones
        # In a header: its parts' token ids so far; None inside a message's body.
        self._header: dict[_Part, list[int]] | None = {p: [] for p in _Part}
        self._part = _Part.ROLE
        self._kind = _Kind.TEXT
        self._name = ""  # the function a CALL message calls
        self._pending: list[int] = []  # body tokens not decoded yet (a character cut short)
        self._arguments = ""  # a CALL message's text so far
        self.reasoning_tokens = 0  # tokens of analysis messages' text, so far

    # --- the OutputParser shape ------------------------------------------------------------
    @property
    def channel(self) -> Channel:
        """Where the tokens now generated go (a header's count as text)."""
        if self._header is not None:
            return Channel.TEXT
        return {
            _Kind.REASONING: Channel.REASONING,
            _Kind.CALL: Channel.TOOL_CALL,
        }.get(self._kind, Channel.TEXT)

    @property
    def partial_tool_body(self) -> str:
        """The open call's span so far (its name, then its arguments)."""
        if self._header is None and self._kind is _Kind.CALL:
            return HarmonyFormat.span(self._name, self._arguments)
        return ""

    @property
    def bare_span(self) -> bool:
        return False  # a harmony call always has its header

    def feed(self, token_ids: Iterable[int]) -> list[Segment]:
        """Consumes generated tokens; returns the segments now known."""
        out: list[Segment] = []
        for token in token_ids:
            self._token(token, out)
        self._flush(out, final=False)
        return out

    def finish(self) -> list[Segment]:
        """Ends the turn: a message cut short (or whose closing stop token was not handed
        over) ends as if closed."""
        out: list[Segment] = []
        if self._header is None:
            # No BOUNDARY: the response's end closes the item, as complete as the turn is.
            self._close(out, boundary=False)
        return out

    # --- per token ---------------------------------------------------------------------------
    def _token(self, token: int, out: list[Segment]) -> None:
        t = self._t
        if self._header is None:  # in a message's body
            if token in t.closers:
                self._close(out)
            elif token == t.start:
                self._close(out)  # a message left open: the next one starts
                self._open_header()
            else:
                self._pending.append(token)
                self.reasoning_tokens += self._kind is _Kind.REASONING
            return
        if token == t.message:
            self._begin_body()
        elif token == t.channel:
            self._part = _Part.CHANNEL
        elif token == t.constrain:
            self._part = _Part.CONSTRAIN
        elif token == t.start or token in t.closers:
            self._open_header()  # a header abandoned: start over
        else:
            self._header[self._part].append(token)

    def _decode(self, ids: list[int]) -> str:
        """Text of ids; a control token out of place (or the end of text) decodes to nothing."""
        return str(self._tokenizer.decode(ids, skip_special_tokens=True)) if ids else ""

    def _open_header(self) -> None:
        self._header = {p: [] for p in _Part}
        self._part = _Part.ROLE

    def _begin_body(self) -> None:
        assert self._header is not None
        parts = {p: self._decode(ids) for p, ids in self._header.items()}
        header = Header.parse(parts[_Part.ROLE], parts[_Part.CHANNEL], parts[_Part.CONSTRAIN])
        self._header = None
        self._pending, self._arguments = [], ""
        name = header.function(self._functions)
        if name is not None:
            self._kind, self._name = _Kind.CALL, name
        elif header.recipient:
            self._kind = _Kind.DROPPED
        elif header.channel == "analysis":
            self._kind = _Kind.REASONING
        else:
            self._kind = _Kind.TEXT

    def _flush(self, out: list[Segment], *, final: bool) -> None:
        """Decodes the body's pending tokens into the open message (all of them when `final`;
        else up to a character cut short)."""
        if self._header is not None or not self._pending:
            return
        text = self._decode(self._pending)
        if text.endswith(REPLACEMENT) and not final:
            return
        self._pending = []
        if self._kind is _Kind.CALL:
            self._arguments += text
        elif self._kind is not _Kind.DROPPED and text:
            channel = Channel.REASONING if self._kind is _Kind.REASONING else Channel.TEXT
            if out and out[-1].channel is channel:
                out[-1] = Segment(channel, out[-1].text + text)
            else:
                out.append(Segment(channel, text))

    def _close(self, out: list[Segment], *, boundary: bool = True) -> None:
        """Ends the open message; the next tokens start a header."""
        self._flush(out, final=True)
        if self._kind is _Kind.CALL:
            out.append(Segment(Channel.TOOL_CALL, HarmonyFormat.span(self._name, self._arguments)))
        elif self._kind is not _Kind.DROPPED and boundary:
            out.append(Segment(Channel.BOUNDARY, ""))
        self._kind, self._name, self._arguments = _Kind.TEXT, "", ""
        self._open_header()
