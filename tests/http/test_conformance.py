"""Open Responses conformance: every object and event kind we emit validates against its schema."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from referencing import Registry, Resource

from tests.support.stack import Stack
from tests.support.tools import WEATHER

SCHEMA = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "openresponses_schema.json").read_text()
)
DEFS: dict[str, Any] = SCHEMA["$defs"]
# Extension events of the seed (compaction), outside Open Responses.
EXTENSIONS = {"mlx.compaction.started", "mlx.compaction.completed"}
# NOTE: the seed (and OpenAI) name reasoning text events `response.reasoning_text.*`; Open
# Responses names the same payloads `response.reasoning.*`. We keep the seed's names and check
# the payload against the Open Responses schema of its twin.
RENAMED = {
    "response.reasoning_text.delta": "response.reasoning.delta",
    "response.reasoning_text.done": "response.reasoning.done",
}


def _event_defs() -> dict[str, str]:
    """Event `type` -> the name of its schema, read from the schema itself."""
    found = {}
    for name, schema in DEFS.items():
        if not name.endswith("StreamingEvent"):
            continue
        kind = schema["properties"]["type"]
        if "$ref" in kind:
            kind = DEFS[kind["$ref"].rsplit("/", 1)[-1]]
        values = kind.get("enum") or [kind.get("const")]
        found[values[0]] = name
    return found


EVENT_DEFS = _event_defs()
_REGISTRY: Registry[Any] = Registry().with_resource(
    "urn:openresponses", Resource.from_contents(SCHEMA)
)


def _check(value: Any, definition: str) -> None:
    schema = {"$ref": f"urn:openresponses#/$defs/{definition}"}
    validator = jsonschema.Draft202012Validator(schema, registry=_REGISTRY)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{definition} at {'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
        for e in errors[:5]
    )


def _check_response(response: dict[str, Any]) -> None:
    # NOTE: the seed keeps `background` off foreground responses ("a foreground response has no
    # such key"), where Open Responses lists it as required; we add it back only to validate.
    _check({"background": False, **response}, "ResponseResource")


def _check_events(events: list[dict[str, Any]]) -> set[str]:
    kinds = set()
    for emitted in events:
        kind = emitted["type"]
        kinds.add(kind)
        if kind in EXTENSIONS:
            continue
        kind = RENAMED.get(kind, kind)
        assert kind in EVENT_DEFS, f"{kind} is not an Open Responses event"
        event = {**emitted, "type": kind}
        if "response" in event:
            event["response"] = {"background": False, **event["response"]}
        _check(event, EVENT_DEFS[kind])
    return kinds


def _stream(stack: Stack, body: dict[str, Any]) -> list[dict[str, Any]]:
    url = f"{stack.base_url}/v1/responses"
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=60) as reply:
        assert reply.status_code == 200
        return [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: ")]


def _model(stack: Stack) -> str:
    return stack.settings.models[0].name


def test_the_schema_fixture_has_what_we_check() -> None:
    assert {"presence_penalty", "frequency_penalty"} <= set(DEFS["ResponseResource"]["required"])
    assert {"response.created", "response.output_text.delta", "response.completed"} <= set(
        EVENT_DEFS
    )


def test_sync_and_stored_responses_conform(stack: Stack) -> None:
    body = {"model": _model(stack), "input": "Reply with: hello", "metadata": {"k": "v"}}
    created = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60).json()
    _check_response(created)
    stored = httpx.get(f"{stack.base_url}/v1/responses/{created['id']}", timeout=60).json()
    _check_response(stored)


@pytest.mark.parametrize(
    ("name", "extra", "expected"),
    [
        ("text", {"input": "Reply with: hello"}, "response.output_text.delta"),
        (
            "tool",
            {"input": "Use the get_weather tool with city set to paris.", "tools": [WEATHER]},
            "response.function_call_arguments.done",
        ),
        (
            "reasoning",
            {
                "input": "Reply with: rain",
                "max_output_tokens": 64,
                "chat_template_kwargs": {"enable_thinking": True},
            },
            "response.reasoning_text.delta",
        ),
        ("incomplete", {"input": "Reply with: hello", "max_output_tokens": 1}, None),
    ],
)
def test_streamed_events_conform(
    stack: Stack, name: str, extra: dict[str, Any], expected: str | None
) -> None:
    kinds = _check_events(_stream(stack, {"model": _model(stack), **extra}))
    if expected is not None:
        assert expected in kinds, f"the {name} turn did not produce {expected}: {sorted(kinds)}"


def test_background_objects_conform(stack: Stack) -> None:
    url = f"{stack.base_url}/v1/responses"
    body = {"model": _model(stack), "input": "Reply with: hello", "background": True}
    queued = httpx.post(url, json=body, timeout=60).json()
    _check(queued, "ResponseResource")
    deadline = time.monotonic() + 60
    polled = queued
    while polled["status"] in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.1)
        polled = httpx.get(f"{url}/{queued['id']}", timeout=60).json()
    assert polled["status"] == "completed"
    _check(polled, "ResponseResource")


def test_the_check_catches_what_was_missing(stack: Stack) -> None:
    body = {"model": _model(stack), "input": "Reply with: hello", "max_output_tokens": 4}
    created = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60).json()
    without = {k: v for k, v in created.items() if k != "presence_penalty"}
    with pytest.raises(AssertionError, match="presence_penalty"):
        _check_response(without)
    with pytest.raises(AssertionError):
        _check_events([{"type": "response.output_text.delta", "sequence_number": 0}])
