"""tests/compat/open_responses_compliance.py: what each Open Responses case's result means here,
and that the script skips cleanly without a copy of the suite (it is not part of CI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.compat.background_shim import patch_sse_line, with_background
from tests.compat.open_responses_compliance import classify, combine, main, report


def _failed(*errors: str, response: Any = None) -> dict[str, Any]:
    return {"id": "case", "status": "failed", "errors": list(errors), "response": response}


def _event_error(event: str, issues: list[dict[str, Any]], turn: int | None = None) -> str:
    prefix = f"Turn {turn}: " if turn else ""
    return f"{prefix}Event validation failed for {event}: {json.dumps(issues)}"


def _union(*branches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"code": "invalid_union", "unionErrors": [{"issues": b} for b in branches]}]


WRONG_TYPE = {"code": "invalid_enum_value", "path": ["type"], "message": "Invalid enum value"}
NO_BACKGROUND = {"code": "invalid_type", "path": ["response", "background"], "message": "Required"}
NO_USAGE = {"code": "invalid_type", "path": ["response", "usage"], "message": "Required"}


@pytest.mark.parametrize(
    ("result", "outcome", "why"),
    [
        ({"id": "basic-response", "status": "passed", "errors": []}, "pass", ""),
        (_failed("background: Required"), "seed", "background"),
        # zod 4 names the missing key its own way.
        (_failed("background: Invalid input: expected boolean"), "seed", "background"),
        # An event whose matching branch misses only the key; the others fail on `type`.
        (
            _failed(
                _event_error(
                    "response.completed",
                    _union([WRONG_TYPE, NO_BACKGROUND], [NO_BACKGROUND]),
                    turn=2,
                )
            ),
            "seed",
            "background",
        ),
        # An event type the schema does not know: the seed's reasoning_text names.
        (
            _failed(_event_error("response.reasoning_text.delta", _union([WRONG_TYPE]))),
            "seed",
            "reasoning_text events",
        ),
        (
            _failed(
                "HTTP 400: [object Object]",
                response={"error": {"code": "context_length_exceeded", "message": "x"}},
            ),
            "seed",
            "compaction",
        ),
        (
            _failed(
                "HTTP 400: [object Object]",
                response={"error": {"code": "unsupported_content", "param": "input_image"}},
            ),
            "model",
            "no images",
        ),
        (
            _failed(
                'Expected output item of type "function_call" but none found',
                response={"output": [{"content": [{"type": "output_text", "text": "D"}]}]},
            ),
            "model",
            "no tool call (answered 'D')",
        ),
    ],
)
def test_known_outcomes(result: dict[str, Any], outcome: str, why: str) -> None:
    assert classify(result) == (outcome, why)


@pytest.mark.parametrize(
    "result",
    [
        # The seed's key missing and something else wrong: a real failure.
        _failed("background: Required", "usage: Required"),
        _failed(_event_error("response.completed", _union([WRONG_TYPE], [NO_USAGE]))),
        # An unknown event type that is not the seed's rename.
        _failed(_event_error("response.made_up", _union([WRONG_TYPE]))),
        _failed("HTTP 500: boom"),
        _failed('Expected status "completed" but got "incomplete"'),  # not the token budget
        _failed(),
    ],
)
def test_anything_else_is_a_failure(result: dict[str, Any]) -> None:
    assert classify(result)[0] == "FAIL"


def test_what_hides_behind_the_key_decides() -> None:
    plain = _failed("background: Required")
    assert combine(plain, {"id": "case", "status": "passed"}) == ("seed", "background")
    hidden = combine(plain, _failed("HTTP 500: boom"))
    assert hidden == ("FAIL", "background; with the key: HTTP 500: boom")


def test_report_counts_only_real_failures(capsys: pytest.CaptureFixture[str]) -> None:
    plain = {
        "a": {"id": "a", "status": "passed"},
        "b": _failed("background: Required"),
        "c": _failed("HTTP 500: boom"),
    }
    assert report("m", plain, {"b": {"id": "b", "status": "passed"}}) == 1
    out = capsys.readouterr().out
    assert "3 cases: 1 pass, 1 as the seed decides, 0 beyond the model, 1 failed" in out
    assert 'a foreground response has no such key."' in out  # the seed's sentence, once


def test_the_shim_adds_the_key_and_nothing_else() -> None:
    event = {"type": "response.completed", "response": {"object": "response", "id": "r"}}
    assert with_background(event)["response"]["background"] is False
    background = {"object": "response", "background": True}
    assert with_background(background) == {"object": "response", "background": True}
    line = patch_sse_line(b'data: {"object": "response"}\n')
    assert json.loads(line[6:]) == {"object": "response", "background": False}
    assert patch_sse_line(b"event: response.completed\n") == b"event: response.completed\n"


def test_skips_cleanly_without_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENRESPONSES_SUITE", raising=False)
    assert main([]) == 0
    assert main([str(tmp_path)]) == 0  # a folder that is not a copy of the suite
    assert capsys.readouterr().out.count("skipped: no copy") == 2
