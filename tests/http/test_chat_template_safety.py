"""Client chat templates: off by default; when allowed, sandboxed, off the loop, time-bound."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import httpx
import pytest
from mlx_responses.service.text import template_guard

from tests.support.stack import Stack

# The sandbox caps one range at 100,000; two nested ones still make 10^10 iterations.
HOSTILE = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
ESCAPE = "{{ ''.__class__.__mro__[1].__subclasses__() }}"


def _body(stack: Stack, **fields: Any) -> dict[str, Any]:
    return {"model": stack.settings.models[0].name, "input": "Reply with: hi", **fields}


def test_client_templates_are_refused_by_default(stack: Stack) -> None:
    body = _body(stack, chat_template_kwargs={"chat_template": "{{ messages }}"})
    for path in ("/v1/responses", "/v1/responses/input_tokens", "/v1/responses/compact"):
        reply = httpx.post(f"{stack.base_url}{path}", json=body, timeout=30)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == "chat_template_kwargs.chat_template"
    # Other template kwargs still reach the model's own template.
    ok = _body(stack, chat_template_kwargs={"enable_thinking": False}, max_output_tokens=4)
    assert httpx.post(f"{stack.base_url}/v1/responses", json=ok, timeout=60).status_code == 200


@pytest.fixture(scope="module")
def allowing(model_path: Any, store_url: str) -> Any:
    with Stack.running(
        model_path=model_path, store_url=store_url, allow_client_chat_template=True
    ) as s:
        yield s


def test_an_allowed_template_is_used(allowing: Stack) -> None:
    template = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}>"
    body = _body(allowing, chat_template_kwargs={"chat_template": template})
    reply = httpx.post(f"{allowing.base_url}/v1/responses/input_tokens", json=body, timeout=30)
    plain = httpx.post(
        f"{allowing.base_url}/v1/responses/input_tokens", json=_body(allowing), timeout=30
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["input_tokens"] != plain.json()["input_tokens"]


def test_templates_render_in_the_sandbox(allowing: Stack) -> None:
    body = _body(allowing, chat_template_kwargs={"chat_template": ESCAPE})
    reply = httpx.post(f"{allowing.base_url}/v1/responses", json=body, timeout=30)
    assert reply.status_code == 400, reply.text
    assert "unsafe" in reply.json()["error"]["message"] or "access" in reply.text


class _HeldClock:
    """The template guard's clock (service/text/template_guard.py): still until `released`, then
    past every deadline. A render started before the release runs for as long as the test
    needs (however slow the machine) and stops at its next line after it; `lines` counts the
    traced template lines that read it."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.lines = 0

    def monotonic(self) -> float:
        self.lines += 1
        return math.inf if self.released.is_set() else 0.0


def test_a_hostile_template_neither_holds_the_core_nor_runs_forever(
    allowing: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behaviour, not a stopwatch: other requests complete while the hostile render is still
    under way (the guard's clock is held, so it cannot reach its deadline meanwhile), and the
    render is then stopped by that deadline (the message says so) rather than finishing."""
    hostile: dict[str, Any] = {}
    probe = _body(allowing, max_output_tokens=2)
    assert httpx.post(f"{allowing.base_url}/v1/responses", json=probe, timeout=30).is_success
    clock = _HeldClock()
    monkeypatch.setattr(template_guard, "time", clock)

    def send() -> None:
        body = _body(allowing, chat_template_kwargs={"chat_template": HOSTILE})
        hostile["reply"] = httpx.post(f"{allowing.base_url}/v1/responses", json=body, timeout=120)

    thread = threading.Thread(target=send)
    thread.start()
    try:
        # The hostile request has reached the core and is rendering: its loop's lines tick.
        while clock.lines < 10_000 and thread.is_alive():
            time.sleep(0.01)
        assert "reply" not in hostile
        for _ in range(3):
            other = httpx.post(f"{allowing.base_url}/v1/responses", json=probe, timeout=30)
            assert other.status_code == 200, other.text
        # All three were served while the hostile render went on.
        assert "reply" not in hostile
    finally:
        clock.released.set()  # its deadline has passed: it stops at its next line
        thread.join(60)
    reply = hostile["reply"]
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["code"] == "invalid_prompt"
    assert "longer than" in reply.json()["error"]["message"]
