"""The new APIs share the Responses machinery: n choices batch, a disconnect frees every slot,
request ids travel."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.stack import Stack
from tests.support.waits import until

USER: Any = [{"role": "user", "content": "Tell me about the sea."}]


def _wait_idle(stack: Stack) -> bool:
    return until(lambda: not stack.engine_stats.active, "the engine holds no sequence")


def test_n_choices_decode_in_one_batch(random_stack: Stack) -> None:
    assert _wait_idle(random_stack)
    stats = random_stack.engine_stats
    steps = stats.decode_steps
    body = {
        "model": random_stack.settings.models[0].name,
        "messages": USER,
        "n": 4,
        "max_tokens": 24,
        "seed": 1,
    }
    reply = httpx.post(f"{random_stack.base_url}/v1/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200
    assert reply.json()["usage"]["completion_tokens"] == 4 * 24
    # Four sequences of 24 tokens one after another would take 96 decode steps.
    assert stats.decode_steps - steps < 2 * 24, stats.decode_steps - steps


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": USER, "n": 2}),
        ("/v1/messages", {"messages": USER, "max_tokens": 100_000}),
        ("/v1/completions", {"prompt": "The sea", "max_tokens": 100_000, "n": 2}),
    ],
)
def test_a_disconnect_frees_every_slot(
    random_stack: Stack, path: str, body: dict[str, Any]
) -> None:
    assert _wait_idle(random_stack)
    body = {"model": random_stack.settings.models[0].name, "stream": True, **body}
    with httpx.stream("POST", f"{random_stack.base_url}{path}", json=body, timeout=60) as reply:
        assert reply.status_code == 200
        lines = 0
        for line in reply.iter_lines():
            lines += line.startswith("data: ")
            if lines >= 12:
                break
    assert lines >= 12
    assert _wait_idle(random_stack), "the engine still holds a slot of the closed stream"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 1}),
    ],
)
def test_request_ids_are_echoed(stack: Stack, path: str, body: dict[str, Any]) -> None:
    reply = httpx.post(
        f"{stack.base_url}{path}",
        json={"model": stack.settings.models[0].name, **body},
        headers={"x-request-id": "req-apis-1"},
        timeout=60,
    )
    assert reply.status_code == 200
    assert reply.headers["x-request-id"] == "req-apis-1"
