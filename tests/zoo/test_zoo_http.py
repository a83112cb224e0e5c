"""A handful of the zoo over HTTP, as a user runs them: a hybrid (qwen3_5, on mlx-lm's batch),
an architecture decoded one at a time (jamba) and multi-head latent attention (deepseek_v3, on
the slots). Each answers four requests at once, streams a response to its end, and serves a
second turn from the prompt cache (before #48, qwen3_5's first request failed and every later
one got 503)."""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.stack import Stack

TOKENS = 6


def _create(stack: Stack, **body: Any) -> dict[str, Any]:
    model = stack.settings.models[0].name
    reply = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={"model": model, "max_output_tokens": TOKENS, "temperature": 0, **body},
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    response: dict[str, Any] = reply.json()
    assert response["status"] in ("completed", "incomplete"), response  # incomplete: the limit
    return response


def _text(response: dict[str, Any]) -> str:
    return "".join(part["text"] for item in response["output"] for part in item.get("content", []))


def _streamed(stack: Stack, text: str) -> list[str]:
    model = stack.settings.models[0].name
    body = {"model": model, "input": text, "max_output_tokens": TOKENS, "stream": True}
    types = []
    with httpx.stream("POST", f"{stack.base_url}/v1/responses", json=body, timeout=120) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: "):
                types.append(json.loads(line[6:])["type"])
    return types


@pytest.mark.parametrize("model_type", ["qwen3_5", "jamba", "deepseek_v3"])
def test_served_over_http(
    model_type: str, zoo_model: Callable[[str], Path], make_stack: Any
) -> None:
    stack = make_stack(model=zoo_model(model_type))
    history = "history " * 100
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda t: _create(stack, input=t), [history, "a", "b c", "d"]))
    alone = _create(stack, input=history)
    assert _text(alone) == _text(answers[0])  # four at once: each as alone
    second = _create(stack, input="next", previous_response_id=alone["id"])
    assert second["usage"]["input_tokens_details"]["cached_tokens"] >= 100
    types = _streamed(stack, "Tell me more")
    assert types[0] == "response.created"
    assert types[-1] in ("response.completed", "response.incomplete")
    assert "response.output_text.delta" in types
