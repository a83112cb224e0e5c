"""GET /openapi.json: a valid OpenAPI 3.1 document of every route; real answers conform to it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from mlx_responses.http_facade.responses.to_proto import SCALAR_PARAMS
from openapi_spec_validator import validate as validate_spec

from tests.support.stack import Stack


@pytest.fixture(scope="module")
def document(stack: Stack) -> dict[str, Any]:
    reply = httpx.get(f"{stack.base_url}/openapi.json", timeout=10)
    assert reply.status_code == 200
    return reply.json()


def conforms(document: dict[str, Any], name: str, instance: Any) -> list[str]:
    """The schema errors of `instance` against components/schemas/`name` (empty: it conforms)."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    validator = Draft202012Validator(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(instance)]


def response_schema(document: dict[str, Any], path: str, method: str, status: int) -> str:
    """The component a documented operation answers with for `status`."""
    responses = document["paths"][path][method]["responses"]
    entry = responses.get(str(status), responses["default"])
    return str(entry["content"]["application/json"]["schema"]["$ref"]).rsplit("/", 1)[1]


def test_document_is_valid_openapi_and_lists_every_route(
    stack: Stack, document: dict[str, Any]
) -> None:
    validate_spec(document)
    for schema in document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    assert stack.runner is not None
    mounted = {
        (route.resource.canonical, route.method.lower())
        for route in stack.runner.app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    documented = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert mounted == documented
    assert ("/v1/responses", "post") in documented
    assert ("/responses/{response_id}", "get") in documented  # the seed's bare aliases


def test_real_answers_conform(stack: Stack, document: dict[str, Any]) -> None:
    base = stack.base_url
    model = stack.settings.models[0].name
    body = {
        "model": model,
        "input": "Reply with: hello",
        "max_output_tokens": 8,
        "include": ["message.output_text.logprobs"],
        "top_logprobs": 2,
        "metadata": {"k": "v"},
    }
    calls: list[tuple[str, str, str, Any]] = [
        ("/v1/responses", "post", "/v1/responses", body),
        ("/v1/responses/input_tokens", "post", "/v1/responses/input_tokens", body),
        ("/v1/models", "get", "/v1/models", None),
        ("/health", "get", "/health", None),
        ("/v1/responses", "post", "/v1/responses", {"model": model, "input": 3}),
        ("/v1/responses/{response_id}", "get", "/v1/responses/resp_nope", None),
        ("/v1/responses/compact", "post", "/v1/responses/compact", body),
        ("/models", "get", "/models", None),
    ]
    created = httpx.post(f"{base}/v1/responses", json=body, timeout=60).json()
    response_id = created["id"]
    job = httpx.post(f"{base}/v1/responses", json={**body, "background": True}, timeout=60)
    assert job.status_code == 200
    assert conforms(document, "Response", job.json()) == []
    one = "/v1/responses/{response_id}"
    calls += [
        (one, "get", f"/v1/responses/{response_id}", None),
        (f"{one}/cancel", "post", f"/v1/responses/{job.json()['id']}/cancel", None),
        (one, "delete", f"/v1/responses/{response_id}", None),
    ]
    conv = httpx.post(f"{base}/v1/conversations", json={"metadata": {"k": "v"}}, timeout=60)
    conv_id = conv.json()["id"]
    user = {"role": "user", "content": "hi"}
    item_id = httpx.post(
        f"{base}/v1/conversations/{conv_id}/items", json={"items": [user]}, timeout=60
    ).json()["data"][0]["id"]
    conv_one = "/v1/conversations/{conversation_id}"
    calls += [
        (f"{one}/input_items", "get", f"/v1/responses/{response_id}/input_items", None),
        ("/v1/conversations", "post", "/v1/conversations", {"items": [user]}),
        (conv_one, "get", f"/v1/conversations/{conv_id}", None),
        (conv_one, "post", f"/v1/conversations/{conv_id}", {"metadata": {"a": "b"}}),
        (f"{conv_one}/items", "get", f"/v1/conversations/{conv_id}/items", None),
        (f"{conv_one}/items", "post", f"/v1/conversations/{conv_id}/items", {"items": [user]}),
        (
            f"{conv_one}/items/{{item_id}}",
            "get",
            f"/v1/conversations/{conv_id}/items/{item_id}",
            None,
        ),
        (
            f"{conv_one}/items/{{item_id}}",
            "delete",
            f"/v1/conversations/{conv_id}/items/{item_id}",
            None,
        ),
        (conv_one, "delete", f"/v1/conversations/{conv_id}", None),
        (conv_one, "get", f"/v1/conversations/{conv_id}", None),
    ]
    statuses = set()
    for template, method, path, payload in calls:
        reply = httpx.request(method, f"{base}{path}", json=payload, timeout=60)
        statuses.add(reply.status_code)
        name = response_schema(document, template, method, reply.status_code)
        assert conforms(document, name, reply.json()) == [], (path, reply.status_code)
    assert {200, 400, 404} <= statuses
    assert created["output"][0]["content"][0]["logprobs"], "logprobs were exercised"
    # The schema is strict enough to notice an encoder that drifts.
    assert conforms(document, "Response", {**created, "status": "done"}) != []
    assert conforms(document, "Response", {**created, "usage": {"input_tokens": 1}}) != []
    del created["output"][0]["content"][0]["annotations"]
    assert conforms(document, "Response", created) != []


def test_streamed_events_conform(stack: Stack, document: dict[str, Any]) -> None:
    op = document["paths"]["/v1/responses"]["post"]["responses"]["200"]["content"]
    assert "text/event-stream" in op
    body = {"model": stack.settings.models[0].name, "input": "Reply with: hello", "stream": True}
    with httpx.stream("POST", f"{stack.base_url}/v1/responses", json=body, timeout=60) as reply:
        events = [
            json.loads(line[len("data: ") :])
            for line in reply.iter_lines()
            if line.startswith("data: ")
        ]
    assert len(events) >= 5
    for event in events:
        assert conforms(document, "ResponseStreamEvent", event) == [], event["type"]


@pytest.mark.parametrize("param", sorted(SCALAR_PARAMS))
def test_request_schema_and_validator_agree(
    stack: Stack, document: dict[str, Any], param: str
) -> None:
    good = {"model": stack.settings.models[0].name, "input": "hi"}
    assert conforms(document, "CreateResponseRequest", good) == []
    bad = {**good, param: ["not", "a", "scalar"]}
    assert conforms(document, "CreateResponseRequest", bad) != []
    reply = httpx.post(f"{stack.base_url}/v1/responses/input_tokens", json=bad, timeout=30)
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == param
