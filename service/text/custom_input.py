"""A custom tool call's input, read from the `{"input": "..."}` arguments the model writes."""

from __future__ import annotations

import json

from mlx_responses.service.text.json_scan import fixed_string_prefix

INPUT = "input"


def input_of(arguments: str) -> str:
    """A custom call's input from the arguments the model wrote (`{"input": "..."}`)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(INPUT), str):
        return str(value[INPUT])
    return arguments


def partial_input(arguments: str) -> str:
    """The part of the input that a growing `{"input": "...` already fixes (no half escapes)."""
    head = arguments.lstrip()
    key = json.dumps(INPUT)
    if not head.startswith("{"):
        return ""
    rest = head[1:].lstrip()
    if not rest.startswith(key):
        return ""
    rest = rest[len(key) :].lstrip()
    if not rest.startswith(":"):
        return ""
    rest = rest[1:].lstrip()
    if not rest.startswith('"'):
        return ""
    return fixed_string_prefix(rest[1:])
