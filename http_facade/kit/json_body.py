"""Parses a request body into JSON, refusing what the decoders downstream cannot take."""

from __future__ import annotations

import json
from typing import Any

from mlx_responses.http_facade.kit.errors import INVALID_JSON, OpenAIError

# OpenAI's own bodies nest a handful of levels (a JSON schema a few more); deeper is abuse, and
# the recursive decoders behind the façade (json, protobuf, the grammar compiler) have limits.
MAX_NESTING_DEPTH = 64


def _unpaired_surrogate(text: str) -> bool:
    # JSON may escape a lone surrogate ("\\ud800"); it is no Unicode text, and protobuf strings
    # must be UTF-8.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_tree(value: Any, limit: int) -> None:
    """Refuses nesting deeper than `limit` and unpaired surrogates (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if not node.isascii() and _unpaired_surrogate(node):
                raise OpenAIError(
                    INVALID_JSON, "The request body holds an unpaired UTF-16 surrogate."
                )
        elif isinstance(node, (dict, list)):
            if depth > limit:
                raise _too_deep_error()
            if isinstance(node, dict):
                stack.extend((key, depth) for key in node)
                stack.extend((child, depth + 1) for child in node.values())
            else:
                stack.extend((child, depth + 1) for child in node)


def _no_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (RFC 8259) has neither.
    raise ValueError(f"{name} is not valid JSON")


def parse_body(raw: bytes) -> Any:
    """The parsed body, or a 400 for malformed, non-UTF-8 or too deeply nested JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OpenAIError(INVALID_JSON, f"The request body is not UTF-8: {exc}") from exc
    return parse_text(text)


def parse_text(text: str) -> Any:
    """`parse_body` of text already decoded (a WebSocket message)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:  # JSONDecodeError, and the constants refused above
        raise OpenAIError(INVALID_JSON, f"The request body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise _too_deep_error() from exc
    _check_tree(value, MAX_NESTING_DEPTH)
    return value


def _too_deep_error() -> OpenAIError:
    return OpenAIError(
        INVALID_JSON, f"The request body nests deeper than {MAX_NESTING_DEPTH} levels."
    )
