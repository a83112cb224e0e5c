"""The bounded JSON decoder: depth, number length, lone surrogates, constants; no recursion."""

from __future__ import annotations

import json

import pytest
from mlx_responses.service.text.json_text import (
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    JsonBoundsError,
    loads_bounded,
)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
        "1" * 5000,
        "-" + "1" * MAX_NUMBER_CHARS,
        "0." + "5" * MAX_NUMBER_CHARS,
        '"\\ud800"',
        '{"\\udc00": 1}',
        '["ok", {"a": ["\\udbff"]}]',
    ],
)
def test_past_the_bounds_is_refused(text: str) -> None:
    with pytest.raises(JsonBoundsError):
        loads_bounded(text)


@pytest.mark.parametrize(
    "text",
    [
        "[" * MAX_DEPTH + "]" * MAX_DEPTH,
        '"[[[[[[[[[[[[' + "[" * 200 + '"',  # brackets inside a string do not nest
        '"\\ud83d\\ude00"',  # a pair is one character
        "1" * MAX_NUMBER_CHARS,
        '{"a": [1, 2.5, true, null, "x"]}',
    ],
)
def test_within_the_bounds_is_json(text: str) -> None:
    assert loads_bounded(text) == json.loads(text)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", "{", "[" * 10_000, b"\xff"])
def test_malformed_is_a_decode_error(text: str | bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        loads_bounded(text)
