"""SSE streaming: event order, framing, ids, joined deltas, reasoning, disconnect cancellation."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai

from tests.support.stack import Stack
from tests.support.waits import until

EXPECTED_ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


def _collapse(types: list[str]) -> list[str]:
    out: list[str] = []
    for t in types:
        if not out or out[-1] != t or not t.endswith(".delta"):
            out.append(t)
    return out


def _raw_events(stack: Stack, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    events = []
    with httpx.stream("POST", f"{stack.base_url}/v1/responses", json=body, timeout=60) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        buffer = ""
        for chunk in reply.iter_text():
            buffer += chunk
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                lines = frame.split("\n")
                assert lines[0].startswith("event: ") and lines[1].startswith("data: ")
                assert len(lines) == 2, "one event line and one data line"
                data = json.loads(lines[1][len("data: ") :])
                assert data["type"] == lines[0][len("event: ") :]
                events.append((data["type"], data))
        assert buffer == ""
    return events


def _model(stack: Stack) -> str:
    return stack.settings.models[0].name


def test_raw_sse_order_and_invariants(stack: Stack) -> None:
    events = _raw_events(
        stack,
        {
            "model": _model(stack),
            "input": "Reply with: hello",
            "stream": True,
            "max_output_tokens": 32,
        },
    )
    types = [t for t, _ in events]
    assert _collapse(types) == EXPECTED_ORDER
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    final = events[-1][1]["response"]
    item = final["output"][0]
    deltas = [d for t, d in events if t == "response.output_text.delta"]
    assert "".join(d["delta"] for d in deltas) == item["content"][0]["text"] == "hello"
    for _, d in events[2:-1]:
        assert d["output_index"] == 0
        assert (d.get("item_id") or d["item"]["id"]) == item["id"]
        if "content_index" in d:
            assert d["content_index"] == 0
    assert events[0][1]["response"]["id"] == final["id"]
    assert events[0][1]["response"]["status"] == "in_progress"
    stored = httpx.get(f"{stack.base_url}/v1/responses/{final['id']}").json()
    assert stored["output"][0]["id"] == item["id"]
    assert stored["output"][0]["content"][0]["text"] == "hello"


def test_sdk_stream_true(stack: Stack) -> None:
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    stream = client.responses.create(
        model=_model(stack), input="Reply with: world", stream=True, max_output_tokens=32
    )
    events = list(stream)
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "world"


def test_sdk_stream_helper(stack: Stack) -> None:
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    with client.responses.stream(
        model=_model(stack), input="Reply with: tokyo", max_output_tokens=32
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "tokyo"


def test_reasoning_streams_when_the_prompt_opens_think(stack: Stack) -> None:
    events = _raw_events(
        stack,
        {
            "model": _model(stack),
            "input": "Reply with: rain",
            "stream": True,
            "max_output_tokens": 64,
            "chat_template_kwargs": {"enable_thinking": True},
        },
    )
    types = [t for t, _ in events]
    first_delta = next(t for t in types if t.endswith(".delta"))
    assert first_delta == "response.reasoning_text.delta"
    final = events[-1][1]["response"]
    kinds = [i["type"] for i in final["output"]]
    assert kinds == ["reasoning", "message"]
    reasoning = "".join(d["delta"] for t, d in events if t == "response.reasoning_text.delta")
    assert reasoning == final["output"][0]["content"][0]["text"]
    assert "rain" in reasoning
    assert final["output"][1]["content"][0]["text"] == "rain"
    assert final["usage"]["output_tokens_details"]["reasoning_tokens"] > 0


def test_model_emitted_think_block_is_split(stack: Stack) -> None:
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    resp = client.responses.create(
        model=_model(stack), input="Think first, then reply with: cloudy", max_output_tokens=64
    )
    assert [i.type for i in resp.output] == ["reasoning", "message"]
    assert resp.output_text == "cloudy"


def test_refusal_before_stream_is_plain_http(stack: Stack) -> None:
    reply = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={"model": "nope", "input": "x", "stream": True},
        timeout=30,
    )
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "model_not_found"


def test_disconnect_cancels_generation(random_stack: Stack) -> None:
    body = {
        "model": random_stack.settings.models[0].name,
        "input": "go on forever",
        "stream": True,
        "max_output_tokens": 100000,
        "temperature": 0,
    }
    stats = random_stack.engine_stats
    cancelled_before = stats.cancelled
    with httpx.stream(
        "POST", f"{random_stack.base_url}/v1/responses", json=body, timeout=60
    ) as reply:
        seen = 0
        for chunk in reply.iter_text():
            seen += chunk.count(".delta\n")
            if seen >= 3:
                break
    until(lambda: stats.cancelled != cancelled_before, "the engine counted the cancel")
    assert stats.cancelled == cancelled_before + 1
    assert stats.active == 0
    steps = stats.decode_steps
    time.sleep(0.3)
    assert stats.decode_steps == steps, "the engine kept decoding after the client left"


def test_multibyte_text_survives_streaming(random_stack: Stack) -> None:
    # Random weights emit arbitrary byte tokens: the joined deltas must equal the final text.
    events = _raw_events(
        random_stack,
        {
            "model": random_stack.settings.models[0].name,
            "input": "héllo wörld ✓",
            "stream": True,
            "max_output_tokens": 200,
            "temperature": 1.0,
        },
    )
    final = events[-1][1]["response"]
    streamed = "".join(d["delta"] for t, d in events if t == "response.output_text.delta")
    reasoning = "".join(d["delta"] for t, d in events if t == "response.reasoning_text.delta")
    texts = [
        p["text"] for item in final["output"] if item["type"] == "message" for p in item["content"]
    ]
    reasons = [
        p["text"]
        for item in final["output"]
        if item["type"] == "reasoning"
        for p in item["content"]
    ]
    assert streamed == "".join(texts)
    assert reasoning == "".join(reasons)
