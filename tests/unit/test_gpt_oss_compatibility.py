"""tests/compat/gpt_oss_compatibility.py: what each run of openai/gpt-oss's compatibility test
means here (records shaped as its runCase/index.ts write them)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.gpt_oss_compatibility import (
    NO_STREAMED_REASONING,
    STREAMED_RESPONSES,
    classify,
)

REASONING = {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "Use it."}]}
CALL = {"type": "function_call", "name": "get_weather", "arguments": "{}"}


def _run(api: str, history: list[Any], **result: Any) -> dict[str, Any]:
    summary = {
        "apiType": api,
        "validResponse": True,
        "successToolCall": True,
        "toolCallingDetails": {"calledToolAtLeastOnce": True, "calledToolWithRightArguments": True},
        "history": history,
        **result,
    }
    return {"test_case": 0, "tool_name": "get_weather", "result": summary}


@pytest.mark.parametrize(
    ("record", "shape", "choice"),
    [
        (_run("responses", [{"output": [REASONING, CALL]}]), "pass", "pass"),
        # The first response wrote no analysis: the model's, not the API's.
        (_run("responses", [{"output": [CALL]}], validResponse=False), "model", "pass"),
        # Reasoning written but the test did not find its shape: the API's.
        (
            _run("responses", [{"output": [{"type": "reasoning"}]}], validResponse=False),
            "FAIL",
            "pass",
        ),
        (
            _run(
                "chat",
                [{"choices": [{"message": {"reasoning_content": "x"}}]}],
                validResponse=False,
            ),
            "FAIL",
            "pass",
        ),
        (
            _run("chat", [{"choices": [{"message": {"content": "hi"}}]}], validResponse=False),
            "model",
            "pass",
        ),
        (
            _run("chat", [None], validEvents=False, details={"hasReasoningDeltas": False}),
            "model",
            "pass",
        ),
        (_run("chat", [None], validEvents=False, details={"other": False}), "FAIL", "pass"),
        # Protocol text leaked into a response is the server's.
        (_run("chat", [{"choices": [{"message": {"reasoning": "<|channel|>"}}]}]), "FAIL", "pass"),
        (
            _run(
                "responses", [{"output": [REASONING]}], successToolCall=False, toolCallingDetails={}
            ),
            "pass",
            "model",
        ),
        ({"test_case": 0, "tool_name": "x", "error": "Max turns (10) exceeded"}, "pass", "model"),
        ({"test_case": 0, "tool_name": "x", "error": "400 status code (no body)"}, "FAIL", "FAIL"),
    ],
)
def test_classify(record: dict[str, Any], shape: str, choice: str) -> None:
    _, got_shape, got_choice = classify(record)
    assert (got_shape[0], got_choice[0]) == (shape, choice)


def test_a_streamed_responses_run_is_the_tests_own_limit() -> None:
    error = "Cannot read properties of undefined (reading 'output')"
    _, shape, choice = classify({"test_case": 0, "tool_name": "x", "error": error})
    assert shape == choice == ("test", STREAMED_RESPONSES)


def test_a_streamed_chat_run_without_reasoning_trips_the_test_at_the_usage_chunk() -> None:
    error = "Cannot read properties of undefined (reading 'delta')"
    api, shape, choice = classify({"test_case": 0, "tool_name": "x", "error": error})
    assert (api, shape, choice) == (
        "chat",
        ("model", NO_STREAMED_REASONING),
        ("test", NO_STREAMED_REASONING),
    )
