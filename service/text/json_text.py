"""The one bounded JSON decoder for JSON the server reads out of a string.

Function-call arguments, compaction payloads, chat_template_kwargs, schemas and tool parameters
all arrive as JSON text inside a field, past the body's own bounds. Python's decoder recurses
per nesting level, refuses integers over 4,300 digits with a plain ValueError and keeps lone
surrogates that UTF-8 (the tokenizer, protobuf) cannot carry: each is refused here as a
JSONDecodeError, so a caller that keeps malformed JSON as text treats it the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any

# As deep as the façade lets a request body nest (http_facade/json_body.py).
MAX_DEPTH = 64
# Digits (and sign, point, exponent) of one number: far past any exact float or int64.
MAX_NUMBER_CHARS = 100

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class JsonBoundsError(json.JSONDecodeError):
    """JSON text past the bounds (too deep, a number too long, a lone surrogate)."""

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message, text, 0)


def _depth_exceeds(text: str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than `limit` (a scan, no recursion)."""
    depth = 0
    for match in _BRACKETS.finditer(_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if not node.isascii():
                try:
                    node.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def loads_bounded(text: str | bytes) -> Any:
    """The value of `text`; raises JSONDecodeError (JsonBoundsError past the bounds)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonBoundsError(f"the JSON is not UTF-8: {exc.reason}", "") from exc
    if _depth_exceeds(text, MAX_DEPTH):
        raise JsonBoundsError(f"the JSON nests deeper than {MAX_DEPTH} levels", text)

    def number(parse: type[int] | type[float]) -> Any:
        def checked(literal: str) -> int | float:
            if len(literal) > MAX_NUMBER_CHARS:
                raise JsonBoundsError(
                    f"the JSON holds a number longer than {MAX_NUMBER_CHARS} characters", text
                )
            return parse(literal)

        return checked

    def constant(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not valid JSON", text, 0)

    value = json.loads(
        text, parse_int=number(int), parse_float=number(float), parse_constant=constant
    )
    if _has_lone_surrogate(value):
        raise JsonBoundsError("the JSON holds an unpaired UTF-16 surrogate", text)
    return value
