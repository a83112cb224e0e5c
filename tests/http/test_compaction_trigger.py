"""Codex's remote compaction v2: a streamed create whose last input item is `compaction_trigger`
answers one `compaction` item, made by the code of `POST /v1/responses/compact`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.http.test_compaction import count, history, name
from tests.support.stack import Stack

BETA = {"x-codex-beta-features": "remote_compaction_v2"}
TRIGGER = {"type": "compaction_trigger"}


@pytest.fixture(scope="module")
def stack(short_context_stack: Stack) -> Stack:
    """The bundled model with a 2,048-token context (compaction's default keep is 1/16 of it)."""
    return short_context_stack


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


def _trigger(stack: Stack, headers: dict[str, str] = BETA, **body: Any) -> httpx.Response:
    body.setdefault("model", name(stack))
    body.setdefault("input", [*history(), TRIGGER])
    body.setdefault("store", False)
    body.setdefault("stream", True)
    return httpx.post(f"{stack.base_url}/v1/responses", json=body, headers=headers, timeout=120)


def test_trigger_streams_one_compaction_item(stack: Stack) -> None:
    reply = _trigger(stack)
    assert reply.status_code == 200, reply.text
    events = _events(reply)
    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["compaction"]
    final = events[-1]["response"]
    assert final["output"] == done and final["store"] is False
    assert final["usage"]["output_tokens"] > 0  # the summary was generated
    # Codex's next request: the user messages it keeps, then the compaction item.
    users = [item for item in history() if item.get("role") == "user"][-2:]
    compacted = [*users, done[0]]
    assert count(stack, input=compacted) < count(stack, input=history())
    follow = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={"model": name(stack), "input": compacted, "max_output_tokens": 8},
        timeout=120,
    )
    assert follow.status_code == 200 and follow.json()["status"] in ("completed", "incomplete")


def test_trigger_item_holds_what_the_compact_endpoint_returns(stack: Stack) -> None:
    """Same code, same history: the same compaction (the bundled model samples greedily)."""
    streamed = _events(_trigger(stack))[-1]["response"]["output"][0]
    compact = httpx.post(
        f"{stack.base_url}/v1/responses/compact",
        json={"model": name(stack), "input": history()},
        timeout=120,
    ).json()
    (item,) = [i for i in compact["output"] if i["type"] == "compaction"]
    assert streamed["encrypted_content"] == item["encrypted_content"]


def test_trigger_without_stream_returns_the_response(stack: Stack) -> None:
    client = openai.OpenAI(
        base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0, default_headers=BETA
    )
    response = client.responses.create(
        model=name(stack),
        input=[*history(), TRIGGER],
        store=False,  # type: ignore[list-item]
    )
    assert [item.type for item in response.output] == ["compaction"]


def _error(reply: httpx.Response) -> dict[str, Any]:
    assert reply.status_code == 400, reply.text
    body: dict[str, Any] = reply.json()["error"]
    return body


def test_refusals(stack: Stack) -> None:
    last = len(history())
    assert _error(_trigger(stack, headers={}))["param"] == f"input[{last}].type"
    misplaced = _trigger(stack, input=[*history()[:2], TRIGGER, *history()[2:]])
    assert _error(misplaced)["param"] == "input[2].type"
    chained = _trigger(stack, previous_response_id="resp_x", input=[TRIGGER])
    assert _error(chained)["param"] == "previous_response_id"
    background = _trigger(stack, stream=False, background=True)
    assert _error(background)["param"] == "background"
    counted = httpx.post(
        f"{stack.base_url}/v1/responses/input_tokens",
        json={"model": name(stack), "input": [*history(), TRIGGER]},
        timeout=60,
    )
    assert _error(counted)["param"] == f"input[{last}].type"
