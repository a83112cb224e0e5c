"""The trained tiny gpt-oss (service/assets/tiny-gpt-oss) on real generation, through the
clients: harmony read on every API with nothing scripted (training/tiny_harmony)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.stack import Stack

MODEL = Path(__file__).resolve().parents[2] / "service" / "assets" / "tiny-gpt-oss"
WEATHER: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
}
BASE: dict[str, Any] = {"model": "tiny-gpt-oss", "temperature": 0, "max_output_tokens": 64}


@pytest.fixture(scope="module")
def gpt_oss(store_url: str) -> Iterator[Stack]:
    with Stack.running(model_path=MODEL, store_url=store_url) as s:
        yield s


def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def test_a_final_answer(gpt_oss: Stack) -> None:
    response = client(gpt_oss).responses.create(input="Say apple.", **BASE)
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output_text == "apple" and response.status == "completed"
    assert "<|" not in response.model_dump_json()


def test_a_tool_call(gpt_oss: Stack) -> None:
    response = client(gpt_oss).responses.create(input="Weather in Paris?", tools=[WEATHER], **BASE)
    assert [item.type for item in response.output] == ["reasoning", "function_call"]
    call = response.output[1]
    assert call.type == "function_call" and call.name == "get_weather"
    # The arguments parse and fill the parameters (the tiny model copies some cities only:
    # training/tiny_harmony/evaluate.py scores it; this one it copies).
    assert json.loads(call.arguments) == {"location": "Paris"}


def _sse(stack: Stack, body: dict[str, Any]) -> list[dict[str, Any]]:
    url = f"{stack.base_url}/v1/responses"
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=60) as reply:
        return [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: {")]


def _same(response: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in response.items() if k not in ("id", "created_at", "completed_at")}
    out["usage"] = {k: v for k, v in out["usage"].items() if k != "input_tokens_details"}
    out["output"] = [
        {k: v for k, v in i.items() if k not in ("id", "call_id")} for i in out["output"]
    ]
    return out


@pytest.mark.parametrize("tools", [False, True], ids=["answer", "call"])
def test_streamed_equals_whole(gpt_oss: Stack, tools: bool) -> None:
    body = {**BASE, "input": "Weather in Rome?" if tools else "Say river."}
    if tools:
        body["tools"] = [WEATHER]
    whole = httpx.post(f"{gpt_oss.base_url}/v1/responses", json=body, timeout=60).json()
    events = _sse(gpt_oss, body)
    numbers = [e["sequence_number"] for e in events]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    opened = {e["item"]["id"] for e in events if e["type"] == "response.output_item.added"}
    done = {e["item"]["id"] for e in events if e["type"] == "response.output_item.done"}
    assert opened == done and len(opened) == 2
    if tools:
        assert "response.function_call_arguments.delta" in kinds
    else:
        assert "response.reasoning_text.delta" in kinds and "response.output_text.delta" in kinds
    assert _same(events[-1]["response"]) == _same(whole)


def test_tool_loop_stateless_and_chained_prompts_agree(gpt_oss: Stack) -> None:
    base = {**BASE, "tools": [WEATHER]}
    url = f"{gpt_oss.base_url}/v1/responses"
    first = httpx.post(url, json={**base, "input": "Weather in Oslo?"}, timeout=60).json()
    reasoning, call = first["output"]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "12C"}
    user = {"role": "user", "content": "Weather in Oslo?"}
    stateless = httpx.post(url, json={**base, "input": [user, reasoning, call, output]}, timeout=60)
    chained = httpx.post(
        url, json={**base, "previous_response_id": first["id"], "input": [output]}, timeout=60
    )
    a, b = stateless.json(), chained.json()
    assert a["usage"]["input_tokens"] == b["usage"]["input_tokens"]
    assert _same(a)["output"] == _same(b)["output"]
    assert a["output"][-1]["type"] == "message" and a["output"][-1]["content"][0]["text"]


def test_chat_completions(gpt_oss: Stack) -> None:
    tools = [{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}]
    reply = client(gpt_oss).chat.completions.create(
        model="tiny-gpt-oss",
        temperature=0,
        messages=[{"role": "user", "content": "Weather in Lima?"}],
        tools=tools,  # type: ignore[arg-type]
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls and choice.message.tool_calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    extra = choice.message.model_extra or {}
    assert extra["reasoning"] == extra["reasoning_content"] and extra["reasoning"]
    answer = client(gpt_oss).chat.completions.create(
        model="tiny-gpt-oss", temperature=0, messages=[{"role": "user", "content": "Say cloud."}]
    )
    assert answer.choices[0].message.content == "cloud"


def test_anthropic_messages(gpt_oss: Stack) -> None:
    body = {
        "model": "tiny-gpt-oss",
        "max_tokens": 64,
        "temperature": 0,
        "messages": [{"role": "user", "content": "Weather in Cairo?"}],
        "tools": [
            {
                "name": "get_weather",
                "description": "The weather in a city.",
                "input_schema": WEATHER["parameters"],
            }
        ],
    }
    reply = httpx.post(f"{gpt_oss.base_url}/v1/messages", json=body, timeout=60).json()
    assert [b["type"] for b in reply["content"]] == ["thinking", "tool_use"]
    assert set(reply["content"][1]["input"]) == {"location"}
    assert reply["stop_reason"] == "tool_use"
