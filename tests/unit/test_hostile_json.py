"""The façade's JSON decoding refuses hostile bodies with a 400, never an unexpected exception."""

from __future__ import annotations

from typing import Any

import pytest
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.kit.json_body import MAX_NESTING_DEPTH, parse_body
from mlx_responses.http_facade.responses.to_proto import params_from_json


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b"[" * (MAX_NESTING_DEPTH + 1) + b"]" * (MAX_NESTING_DEPTH + 1),
        b'{"temperature": NaN}',
        b'{"max_output_tokens": Infinity}',
        b'{"model": "\\ud800"}',
        b'{"metadata": {"\\udfff": "v"}}',
        b"\xff\xfe{}",
        b'{"model": ',
    ],
)
def test_bad_bodies_are_invalid_json(raw: bytes) -> None:
    with pytest.raises(OpenAIError) as caught:
        parse_body(raw)
    assert caught.value.status == 400
    assert caught.value.code == "invalid_json"


def test_nesting_at_the_limit_parses() -> None:
    depth = MAX_NESTING_DEPTH
    assert parse_body(b"[" * depth + b"]" * depth) is not None
    assert parse_body('{"model": "ü\U0001f600"}'.encode()) == {"model": "ü\U0001f600"}


BASE: dict[str, Any] = {"model": "m", "input": "hi"}


@pytest.mark.parametrize(
    ("override", "param"),
    [
        ({"max_output_tokens": 2**70}, "max_output_tokens"),
        ({"top_logprobs": 2**40}, "top_logprobs"),
        ({"temperature": 10**400}, "temperature"),
        ({"input": [{"type": "message", "role": [], "content": "x"}]}, "input[0].role"),
        ({"input": [{"role": "user", "content": "x", "status": {}}]}, "input[0].status"),
        ({"input": [{"role": "user", "content": "x", "status": "done"}]}, "input[0].status"),
        ({"input": [{"type": [1], "content": "x"}]}, "input[0].type"),
        ({"tools": [{"type": ["function"]}]}, "tools[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": {"a": 1}}]}]},
            "input[0].content[0].type",
        ),
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"text": 5}]}]},
            "input[0].output[0].text",
        ),
        ({"input": [{"type": "reasoning", "content": 7}]}, "input[0].content"),
        (
            {"context_management": [{"type": "compaction", "compact_threshold": -(2**64)}]},
            "context_management[0].compact_threshold",
        ),
    ],
)
def test_hostile_values_are_400_with_a_param(override: dict[str, Any], param: str | None) -> None:
    try:
        params_from_json({**BASE, **override})
    except OpenAIError as error:
        assert error.status == 400
        assert error.param == param
    else:
        assert param is None, "accepted a value that should have been refused"
