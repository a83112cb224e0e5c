"""Finds where a JSON value ends in text that may still be growing (streamed tool calls)."""

from __future__ import annotations

import json

_OPEN = {"{": "}", "[": "]"}
_BLANK = " \t\r\n"


def skip_blank(text: str, pos: int) -> int:
    """The first position at or after `pos` that is not JSON whitespace."""
    while pos < len(text) and text[pos] in _BLANK:
        pos += 1
    return pos


def value_end(text: str, pos: int) -> int | None:
    """The end of the JSON value starting at `pos`, or None while it is not complete.

    It follows strings and nesting only; whether the value is valid is json.loads' business.
    A bare number or literal is complete only once something follows it.
    """
    if pos >= len(text):
        return None
    first = text[pos]
    if first == '"':
        return _string_end(text, pos)
    if first not in _OPEN:
        end = pos
        while end < len(text) and text[end] not in ",}] \t\r\n[{":
            end += 1
        return end if end < len(text) else None
    stack = [_OPEN[first]]
    i = pos + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            closed = _string_end(text, i)
            if closed is None:
                return None
            i = closed
            continue
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return None


def _string_end(text: str, pos: int) -> int | None:
    i = pos + 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        i += 1
    return None


def fixed_string_prefix(body: str) -> str:
    """What a JSON string that may still be growing already fixes: `body` is its text after
    the opening quote; it ends at the closing quote, if one came, and a half escape is left out."""
    end, i = len(body), 0
    while i < len(body):
        if body[i] == '"':
            end = i
            break
        if body[i] == "\\":
            width = 6 if body[i + 1 : i + 2] == "u" else 2
            if i + width > len(body):
                end = i
                break
            i += width
            continue
        i += 1
    try:
        return str(json.loads('"' + body[:end] + '"'))
    except ValueError:
        return ""
