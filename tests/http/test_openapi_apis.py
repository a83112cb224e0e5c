"""/openapi.json covers Chat Completions, Completions and Anthropic Messages; answers conform."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from tests.support.stack import Stack


@pytest.fixture(scope="module")
def document(stack: Stack) -> dict[str, Any]:
    return dict(httpx.get(f"{stack.base_url}/openapi.json", timeout=10).json())


def conforms(document: dict[str, Any], name: str, instance: Any) -> list[str]:
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return [
        f"{list(e.absolute_path)}: {e.message}"
        for e in Draft202012Validator(schema).iter_errors(instance)
    ]


def _sse_data(stack: Stack, path: str, body: dict[str, Any]) -> list[Any]:
    with httpx.stream("POST", f"{stack.base_url}{path}", json=body, timeout=60) as reply:
        return [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: {")]


@pytest.mark.parametrize(
    "case",
    [
        (
            "/v1/chat/completions",
            "ChatCompletionRequest",
            "ChatCompletion",
            "ChatCompletionStreamEvent",
            "Error",
            {
                "messages": [{"role": "user", "content": "Reply with: hello"}],
                "logprobs": True,
                "top_logprobs": 2,
                "stream_options": {"include_usage": True},
            },
        ),
        (
            "/v1/completions",
            "CompletionRequest",
            "Completion",
            "CompletionStreamEvent",
            "Error",
            {"prompt": "The sea", "max_tokens": 4, "logprobs": 2},
        ),
        (
            "/v1/messages",
            "AnthropicMessageRequest",
            "AnthropicMessage",
            "AnthropicStreamEvent",
            "AnthropicError",
            {"max_tokens": 16, "messages": [{"role": "user", "content": "Reply with: hello"}]},
        ),
    ],
)
def test_answers_conform(
    stack: Stack, document: dict[str, Any], case: tuple[str, str, str, str, str, dict[str, Any]]
) -> None:
    path, request_schema, ok, event, error, body = case
    body = {"model": stack.settings.models[0].name, **body}
    assert conforms(document, request_schema, body) == []
    op = document["paths"][path]["post"]
    # Each event an object whose `data` is JSON of the payload schema (OpenAPI 3.2's reading).
    data = op["responses"]["200"]["content"]["text/event-stream"]["schema"]["properties"]["data"]
    payload = data["anyOf"][0] if "anyOf" in data else data  # chat and completions: or [DONE]
    assert payload["contentSchema"]["$ref"].endswith(event), data
    assert op["responses"]["default"]["content"]["application/json"]["schema"]["$ref"].endswith(
        error
    )
    whole = httpx.post(f"{stack.base_url}{path}", json=body, timeout=60)
    assert whole.status_code == 200
    assert conforms(document, ok, whole.json()) == []
    events = _sse_data(stack, path, {**body, "stream": True})
    assert len(events) >= 3
    for payload in events:
        assert conforms(document, event, payload) == [], payload
    refused = httpx.post(f"{stack.base_url}{path}", json={**body, "model": "nope"}, timeout=30)
    assert refused.status_code == 404
    assert conforms(document, error, refused.json()) == []
    # A stream the core breaks off ends with an error frame: an event of the stream too.
    assert conforms(document, event, refused.json()) == []


def test_every_new_route_is_documented(document: dict[str, Any]) -> None:
    for path in (
        "/v1/chat/completions",
        "/chat/completions",
        "/v1/messages",
        "/messages",
        "/v1/messages/count_tokens",
        "/v1/completions",
        "/completions",
    ):
        assert "post" in document["paths"][path], path
