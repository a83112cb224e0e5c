"""text.format json_schema / json_object: constrained decoding, and invalid schemas as 400."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import openai

from tests.support.stack import Stack

SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"enum": ["hello", "world", "yes", "no"]},
        "sure": {"type": "boolean"},
    },
    "required": ["answer", "sure"],
    "additionalProperties": False,
}


def _json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {"format": {"type": "json_schema", "name": "reply", "schema": schema, "strict": True}}


def _create(stack: Stack, **fields: Any) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, "max_output_tokens": 64, **fields}
    return httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)


def test_output_follows_the_schema(stack: Stack) -> None:
    reply = _create(stack, input="Reply with: hello", text=_json_schema(SCHEMA)).json()
    assert reply["status"] == "completed"
    data = json.loads(reply["output"][0]["content"][0]["text"])
    assert set(data) == {"answer", "sure"}
    assert data["answer"] in SCHEMA["properties"]["answer"]["enum"]
    assert isinstance(data["sure"], bool)
    assert reply["text"]["format"]["schema"] == SCHEMA
    assert reply["text"]["format"]["name"] == "reply"


def test_json_object(random_stack: Stack) -> None:
    reply = _create(
        random_stack, input="x", text={"format": {"type": "json_object"}}, temperature=0
    )
    body = reply.json()
    text = body["output"][0]["content"][0]["text"] if body["output"] else ""
    if body["status"] == "completed":
        assert isinstance(json.loads(text), dict)
    else:  # a random model may wander inside a string until the cap
        assert text.lstrip().startswith("{")


def test_constraint_is_per_request_inside_a_batch(random_stack: Stack) -> None:
    results: dict[str, Any] = {}

    def run(name: str, fields: dict[str, Any]) -> None:
        results[name] = _create(random_stack, input="x", temperature=0, **fields).json()

    threads = [
        threading.Thread(target=run, args=("schema", {"text": _json_schema(SCHEMA)})),
        threading.Thread(target=run, args=("free", {"max_output_tokens": 48})),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    constrained = results["schema"]
    assert constrained["status"] == "completed"
    assert (
        json.loads(constrained["output"][0]["content"][0]["text"])["answer"]
        in (SCHEMA["properties"]["answer"]["enum"])
    )
    assert results["free"]["status"] == "incomplete"


def test_invalid_schema_is_400(stack: Stack) -> None:
    reply = _create(stack, input="x", text=_json_schema({"type": "no-such-type"}))
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == "text.format.schema"
    assert error["code"] == "invalid_json_schema"


def test_a_keyword_the_grammar_cannot_enforce_is_left_out_unless_strict(stack: Stack) -> None:
    """`if`/`then` are not implemented by llguidance: without `strict` the rest of the schema
    holds the answer; with it, the schema is refused by name (nothing is generated)."""
    schema = {**SCHEMA, "if": {"properties": {"sure": {"const": True}}}, "then": {}}
    fmt = _json_schema(schema)
    fmt["format"]["strict"] = False
    reply = _create(stack, input="Reply with: hello", text=fmt)
    assert reply.status_code == 200, reply.text
    answer = json.loads(reply.json()["output"][0]["content"][0]["text"])
    assert (
        set(answer) == {"answer", "sure"}
        and answer["answer"] in SCHEMA["properties"]["answer"]["enum"]
    )
    reply = _create(stack, input="Reply with: hello", text=_json_schema(schema))
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert (error["param"], error["code"]) == ("text.format.schema", "invalid_json_schema")
    assert '"if", "then"' in error["message"], error


def test_invalid_schema_is_400_for_background_too(stack: Stack) -> None:
    reply = _create(stack, input="x", background=True, text=_json_schema({"type": 5}))
    assert reply.status_code == 400


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["city", "n"],
}


def test_small_model_finishes_an_unbounded_schema(stack: Stack) -> None:
    """Unbounded strings and integers are bounded, so the tiny model completes (issue 7)."""
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    reply = client.responses.create(
        model=stack.settings.models[0].name,
        input="What is the weather in paris?",
        max_output_tokens=200,
        text=_json_schema(CITY),  # type: ignore[arg-type]
    )
    assert reply.status == "completed", reply.output_text
    data = json.loads(reply.output_text)
    assert set(data) == {"city", "n"}
    assert isinstance(data["city"], str) and isinstance(data["n"], int)
    assert reply.usage is not None and reply.usage.output_tokens < 200


def test_schema_bounds_win_over_the_defaults(stack: Stack) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 7, "maximum": 9}},
        "required": ["n"],
    }
    reply = _create(stack, input="x", max_output_tokens=200, text=_json_schema(schema)).json()
    assert reply["status"] == "completed"
    assert json.loads(reply["output"][0]["content"][0]["text"])["n"] in (7, 8, 9)
