"""tools/openresponses_compliance.py: what each Open Responses case's result means here."""

from __future__ import annotations

from typing import Any

import pytest

from tools.openresponses_compliance import (
    IMAGE_REASON,
    SEED_BACKGROUND,
    SEED_COMPACTION,
    TOOL_REASON,
    classify,
    report,
)


def _failed(*errors: str) -> dict[str, Any]:
    return {"id": "case", "status": "failed", "errors": list(errors)}


@pytest.mark.parametrize(
    ("result", "outcome", "why"),
    [
        ({"id": "basic-response", "status": "passed", "errors": []}, "pass", ""),
        # zod 3 and zod 4 name the missing key their own way.
        (_failed("background: Required"), "seed", SEED_BACKGROUND),
        (
            _failed("background: Invalid input: expected boolean, received undefined"),
            "seed",
            SEED_BACKGROUND,
        ),
        (
            _failed('HTTP 400: {"error": {"code": "context_length_exceeded", "message": "x"}}'),
            "seed",
            SEED_COMPACTION,
        ),
        (
            _failed('Expected output item of type "function_call" but none found'),
            "model",
            TOOL_REASON,
        ),
        (
            _failed(
                "Missing response.output_item.added event with function_call item",
                "Missing response.function_call_arguments.delta event",
            ),
            "model",
            TOOL_REASON,
        ),
        (
            _failed(
                'HTTP 400: {"error": {"message": "Images are not supported by this text model"}}'
            ),
            "model",
            IMAGE_REASON,
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
        _failed("HTTP 500: boom"),
        # An orphan tool output accepted instead of refused.
        _failed("Expected HTTP 400 but got 200"),
        _failed(),
    ],
)
def test_anything_else_is_a_failure(result: dict[str, Any]) -> None:
    assert classify(result)[0] == "FAIL"


def test_report_counts_only_real_failures(capsys: pytest.CaptureFixture[str]) -> None:
    results = [
        {"id": "a", "status": "passed"},
        _failed("background: Required"),
        _failed("HTTP 500: boom"),
    ]
    assert report(results) == 1
    assert "3 cases: 1 pass, 1 as the seed decides, 0 beyond the model, 1 failed" in (
        capsys.readouterr().out
    )
