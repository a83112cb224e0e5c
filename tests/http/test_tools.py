"""Function tools: a tool call as a function_call item (JSON and SSE), then its output replayed."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.support.stack import Stack
from tests.support.tools import WEATHER

PROMPT = "Use the get_weather tool with city set to paris."


@pytest.fixture(scope="module")
def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def test_tool_call_then_tool_output(client: openai.OpenAI, stack: Stack) -> None:
    model = stack.settings.models[0].name
    first = client.responses.create(model=model, input=PROMPT, tools=[WEATHER])  # type: ignore[list-item]
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1
    call = calls[0]
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "paris"}
    assert call.call_id.startswith("call_") and call.id.startswith("fc_")
    assert first.tools[0].name == "get_weather"  # type: ignore[union-attr]
    second = client.responses.create(
        model=model,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.output_text == "sunny"


def test_tool_call_streams_as_function_call_events(make_stack: Any) -> None:
    # One delta per decode step: with the default 10 ms window a fast CPU can decode the whole
    # argument inside one window, and it would then arrive as one delta.
    stack = make_stack(stream_window_ms=0)
    body: dict[str, Any] = {
        "model": stack.settings.models[0].name,
        "input": PROMPT,
        "tools": [WEATHER],
        "stream": True,
    }
    events = []
    with httpx.stream("POST", f"{stack.base_url}/v1/responses", json=body, timeout=60) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    types = [e["type"] for e in events]
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) > 1, "arguments stream while they are generated"
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert "".join(d["delta"] for d in deltas) == done["arguments"]
    assert json.loads(done["arguments"]) == {"city": "paris"}
    assert types.index("response.output_item.added") < types.index(
        "response.function_call_arguments.delta"
    )
    final = events[-1]["response"]
    call = next(i for i in final["output"] if i["type"] == "function_call")
    assert done["item_id"] == call["id"]
    added = next(e for e in events if e["type"] == "response.output_item.added")
    assert added["item"]["type"] == "function_call" and added["item"]["call_id"] == call["call_id"]


def test_tool_choice_none_keeps_tools_out_of_the_prompt(stack: Stack) -> None:
    url = f"{stack.base_url}/v1/responses/input_tokens"
    model = stack.settings.models[0].name
    with_tools = httpx.post(url, json={"model": model, "input": PROMPT, "tools": [WEATHER]}).json()
    none = httpx.post(
        url, json={"model": model, "input": PROMPT, "tools": [WEATHER], "tool_choice": "none"}
    ).json()
    assert none["input_tokens"] < with_tools["input_tokens"]


def test_tool_refusals(stack: Stack) -> None:
    model = stack.settings.models[0].name
    url = f"{stack.base_url}/v1/responses"
    for body, param in (
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        ({"tools": [WEATHER, WEATHER]}, "tools[1].name"),
        ({"tools": [{"type": "mcp", "server_label": "x"}]}, "tools[0].type"),
    ):
        reply = httpx.post(url, json={"model": model, "input": "x", **body}, timeout=30)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == param
