"""Oversized and hostile values: bounded errors in the OpenAI envelope, never a 5xx; 413 bodies."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mlx_responses.http_facade.config import DEFAULT_MAX_REQUEST_BYTES
from mlx_responses.http_facade.kit.errors import MAX_ERROR_MESSAGE_BYTES

from tests.support.stack import Stack

HUGE = "x" * 100_000
# Three-byte UTF-8 characters grow ninefold when percent-encoded into grpc-message.
WIDE = "€" * 40_000


def _envelope(reply: httpx.Response) -> dict[str, Any]:
    assert reply.status_code < 500, reply.text[:500]
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    assert len(error["message"].encode()) <= MAX_ERROR_MESSAGE_BYTES
    return dict(error)


@pytest.mark.parametrize("value", [HUGE, WIDE], ids=["ascii", "wide"])
@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/responses/input_tokens", "model"),
        ("/v1/responses", "model"),
        ("/v1/responses", "previous_response_id"),
        ("/v1/responses", "tool_choice"),
        ("/v1/responses/input_tokens", "previous_response_id"),
    ],
)
def test_huge_echoed_values_stay_4xx(stack: Stack, path: str, field: str, value: str) -> None:
    body = {"model": stack.settings.models[0].name, "input": "Reply with: hi", field: value}
    reply = httpx.post(f"{stack.base_url}{path}", json=body, timeout=60)
    error = _envelope(reply)
    assert reply.status_code in (400, 404), error
    assert error["message"].endswith("(truncated)")


@pytest.mark.parametrize("method", ["GET", "DELETE", "POST"])
def test_long_ids_in_the_path_are_404(stack: Stack, method: str) -> None:
    # 6 kB percent-encoded: within aiohttp's 8190-byte request line (longer is its own 400).

    suffix = "/cancel" if method == "POST" else ""
    reply = httpx.request(
        method, f"{stack.base_url}/v1/responses/resp_{'é' * 1000}{suffix}", timeout=60
    )
    assert reply.status_code == 404
    assert _envelope(reply)["code"] == "not_found"


def test_body_over_the_limit_is_413(stack: Stack) -> None:
    body = json.dumps({"model": "m", "input": "y" * DEFAULT_MAX_REQUEST_BYTES})
    reply = httpx.post(
        f"{stack.base_url}/v1/responses",
        content=body,
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert reply.status_code == 413
    error = _envelope(reply)
    assert error["code"] == "request_too_large"
    assert str(DEFAULT_MAX_REQUEST_BYTES) in error["message"]
    assert httpx.get(f"{stack.base_url}/health", timeout=10).status_code == 200


def test_ids_are_unguessable_and_near_misses_are_404(stack: Stack) -> None:
    body = {"model": stack.settings.models[0].name, "input": "Reply with: hi"}
    ids = [
        httpx.post(f"{stack.base_url}/v1/responses", json={**body, "max_output_tokens": 4}).json()[
            "id"
        ]
        for _ in range(2)
    ]
    for response_id in ids:
        prefix, _, token = response_id.partition("_")
        assert prefix == "resp" and len(token) == 48 and int(token, 16) >= 0  # 192 random bits
    assert ids[0][5:13] != ids[1][5:13]
    real = ids[0]
    flipped = real[:-1] + ("0" if real[-1] != "0" else "1")
    for wrong in (flipped, real.upper(), real[:-1], real + "0", f"{real}%00", f"{real}%2F"):
        reply = httpx.get(f"{stack.base_url}/v1/responses/{wrong}", timeout=30)
        assert reply.status_code == 404, (wrong, reply.text)
        assert _envelope(reply)["code"] == "not_found"
    found = httpx.get(f"{stack.base_url}/v1/responses/{real}", timeout=30)
    assert found.status_code == 200 and found.json()["id"] == real


def test_a_draining_core_refuses_new_calls_but_answers_health(stack: Stack) -> None:
    assert stack.core is not None
    stack.core.draining = True
    try:
        body = {"model": stack.settings.models[0].name, "input": "Reply with: hi"}
        reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=30)
        assert reply.status_code == 503
        error = reply.json()["error"]
        assert error["code"] == "model_not_ready" and "shutting down" in error["message"]
        assert httpx.get(f"{stack.base_url}/health", timeout=10).status_code == 200
    finally:
        stack.core.draining = False
    assert httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60).status_code == 200
