"""Every refusal of the create surface: status, error.type, error.code, error.param; no 500s."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.stack import Stack


def _post(stack: Stack, path: str, body: Any, raw: bool = False) -> httpx.Response:
    url = f"{stack.base_url}{path}"
    if raw:
        return httpx.post(
            url, content=body, headers={"content-type": "application/json"}, timeout=60
        )
    return httpx.post(url, json=body, timeout=60)


def _model(stack: Stack) -> str:
    return stack.settings.models[0].name


CASES: list[tuple[str, dict[str, Any], int, str | None, str | None]] = [
    # (name, body overrides, status, param, code)
    ("temperature_high", {"temperature": 2.5}, 400, "temperature", "invalid_value"),
    ("temperature_low", {"temperature": -1}, 400, "temperature", "invalid_value"),
    ("temperature_type", {"temperature": "warm"}, 400, "temperature", "invalid_type"),
    ("top_p_high", {"top_p": 1.1}, 400, "top_p", "invalid_value"),
    ("top_p_low", {"top_p": -0.5}, 400, "top_p", "invalid_value"),
    ("max_output_tokens_zero", {"max_output_tokens": 0}, 400, "max_output_tokens", "invalid_value"),
    (
        "max_output_tokens_type",
        {"max_output_tokens": "many"},
        400,
        "max_output_tokens",
        "invalid_type",
    ),
    ("empty_string_input", {"input": ""}, 400, "input", "empty_input"),
    ("empty_array_input", {"input": []}, 400, "input", None),
    ("missing_input", {"input": None}, 400, "input", "missing_required_parameter"),
    (
        "unknown_item_type",
        {"input": [{"type": "telepathy"}]},
        400,
        "input[0].type",
        "invalid_value",
    ),
    ("truncation_auto", {"truncation": "auto"}, 400, "truncation", "unsupported_value"),
    ("hosted_tool", {"tools": [{"type": "web_search"}]}, 400, "tools[0].type", "unsupported_tool"),
    ("unknown_model", {"model": "gpt-imaginary"}, 404, "model", "model_not_found"),
    ("model_type", {"model": 7}, 400, "model", "invalid_type"),
    (
        "bad_compaction",
        {"input": [{"type": "compaction", "encrypted_content": "!!notbase64json"}]},
        400,
        "input",
        "invalid_compaction",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "status", "param", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_create_refusals(
    stack: Stack, overrides: dict[str, Any], status: int, param: str | None, code: str | None
) -> None:
    body = {"model": _model(stack), "input": "Reply with: hello", **overrides}
    body = {k: v for k, v in body.items() if v is not None}
    reply = _post(stack, "/v1/responses", body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["code"] == code
    assert error["message"]


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe"])
def test_malformed_json(stack: Stack, raw: bytes) -> None:
    reply = _post(stack, "/v1/responses", raw, raw=True)
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "invalid_json"


def test_body_must_be_an_object(stack: Stack) -> None:
    reply = _post(stack, "/v1/responses", [1, 2])
    assert reply.status_code == 400
    assert reply.json()["error"]["type"] == "invalid_request_error"


def test_unknown_route_is_openai_shaped(stack: Stack) -> None:
    reply = httpx.get(f"{stack.base_url}/v1/nothing-here")
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "unknown_url"


def test_server_keeps_serving_after_refusals(stack: Stack) -> None:
    for case in CASES:
        _post(stack, "/v1/responses", {"model": _model(stack), "input": "x", **case[1]})
    reply = _post(
        stack,
        "/v1/responses",
        {"model": _model(stack), "input": "Reply with: ok", "max_output_tokens": 8},
    )
    assert reply.status_code == 200
    assert reply.json()["output"][0]["content"][0]["text"] == "ok"


def test_input_longer_than_the_context_window(stack: Stack) -> None:
    window = httpx.get(f"{stack.base_url}/v1/models").json()["data"][0]["context_length"]
    words = "hello " * (window + 1)  # a token a word at least
    reply = _post(stack, "/v1/responses", {"model": _model(stack), "input": words})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "input"
