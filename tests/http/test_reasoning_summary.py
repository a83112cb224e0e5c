"""`reasoning.summary`: reasoning items carry a summary (the reasoning text itself) and stream
the summary events, checked against the Open Responses schema."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.http.test_conformance import _check_events, _check_response
from tests.support.stack import Stack

THINK = {"chat_template_kwargs": {"enable_thinking": True}}


def _sdk(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def _body(stack: Stack, **extra: Any) -> dict[str, Any]:
    return {
        "model": stack.settings.models[0].name,
        "input": "Reply with: rain",
        "max_output_tokens": 64,
        **THINK,
        **extra,
    }


@pytest.mark.parametrize("summary", ["auto", "concise", "detailed"])
def test_reasoning_items_carry_their_text_as_summary(stack: Stack, summary: str) -> None:
    resp = _sdk(stack).responses.create(
        model=stack.settings.models[0].name,
        input="Reply with: rain",
        max_output_tokens=64,
        reasoning={"summary": summary},  # type: ignore[typeddict-item]
        extra_body=THINK,
    )
    reasoning = resp.output[0]
    assert reasoning.type == "reasoning"
    assert reasoning.content is not None and reasoning.content[0].type == "reasoning_text"
    text = reasoning.content[0].text
    assert text and [(s.type, s.text) for s in reasoning.summary] == [("summary_text", text)]
    stored = httpx.get(f"{stack.base_url}/v1/responses/{resp.id}").json()
    _check_response(stored)
    assert stored["output"][0]["summary"] == [{"type": "summary_text", "text": text}]


def test_without_summary_the_summary_stays_empty(stack: Stack) -> None:
    reply = httpx.post(f"{stack.base_url}/v1/responses", json=_body(stack), timeout=60).json()
    assert reply["output"][0]["type"] == "reasoning" and reply["output"][0]["summary"] == []


def test_streamed_summary_events_conform_and_nest(stack: Stack) -> None:
    with _sdk(stack).responses.create(
        model=stack.settings.models[0].name,
        input="Reply with: rain",
        max_output_tokens=64,
        reasoning={"summary": "auto"},
        extra_body=THINK,
        stream=True,
    ) as stream:
        events = [e.model_dump(exclude_unset=True) for e in stream]
    _check_events(events)
    kinds = [e["type"] for e in events]
    first = kinds.index("response.output_item.added")
    done = kinds.index("response.output_item.done")
    inside = kinds[first : done + 1]
    assert inside[:3] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.content_part.added",
    ]
    assert inside[-5:] == [
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
    ]
    deltas = [e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta"]
    text_deltas = [e["delta"] for e in events if e["type"] == "response.reasoning_text.delta"]
    assert deltas and deltas == text_deltas
    summary_done = next(e for e in events if e["type"] == "response.reasoning_summary_text.done")
    assert summary_done["text"] == "".join(deltas) and summary_done["summary_index"] == 0
    final = events[-1]["response"]["output"][0]
    assert final["summary"] == [{"type": "summary_text", "text": "".join(deltas)}]


def test_an_unknown_summary_value_is_a_400(stack: Stack) -> None:
    body = _body(stack, reasoning={"summary": "verbose"})
    reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "reasoning.summary"
