"""A request's fan-out (prompts x n) is admitted as one unit: every shape a request's own
limits allow is served on an idle server; a 503 comes from real load only."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mlx_responses.service.engine.fan_out_groups import FanOutGroups
from mlx_responses.service.fan_out import MAX_SIZE, WAIT_SECS, parse_fan_out

from tests.support.stack import Stack


@pytest.fixture(scope="module")
def small_queue(random_model: Path) -> Iterator[Stack]:
    """Room for 4 requests in flight: 2 in the batch, 2 waiting."""
    with Stack.running(random_model, max_batch_size=2, max_queued_requests=2) as stack:
        yield stack


def _post(stack: Stack, path: str, **body: Any) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, **body}
    return httpx.post(f"{stack.base_url}{path}", json=body, timeout=120)


def test_sixteen_prompts_times_n_on_an_idle_server_are_served(small_queue: Stack) -> None:
    """16 prompts x n 2 = 32 calls against a queue of 4 (503 before); chat's n too."""
    prompts = [f"Story {i}:" for i in range(16)]
    reply = _post(small_queue, "/v1/completions", prompt=prompts, n=2, max_tokens=2)
    assert reply.status_code == 200, reply.text
    choices = reply.json()["choices"]
    assert sorted(c["index"] for c in choices) == list(range(32))
    chat = _post(
        small_queue,
        "/v1/chat/completions",
        messages=[{"role": "user", "content": "hi"}],
        n=16,
        max_tokens=2,
    )
    assert chat.status_code == 200 and len(chat.json()["choices"]) == 16, chat.text
    streamed = _post(
        small_queue, "/v1/completions", prompt=prompts[:8], n=2, max_tokens=2, stream=True
    )
    assert streamed.status_code == 200 and "data: [DONE]" in streamed.text
    assert small_queue.core is not None
    assert small_queue.core.models.default.runtime.worker.in_flight == 0  # nothing left held


def test_real_load_is_still_a_503(small_queue: Stack) -> None:
    """A fan-out in flight fills the queue: a lone request meanwhile is refused."""
    replies: dict[str, httpx.Response] = {}

    def fan() -> None:
        replies["fan"] = _post(
            small_queue, "/v1/completions", prompt=["a", "b"], n=4, max_tokens=400
        )

    thread = threading.Thread(target=fan)
    thread.start()
    assert small_queue.core is not None
    worker = small_queue.core.models.default.runtime.worker
    deadline = time.monotonic() + 30
    while worker.stats.running == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    lone = _post(small_queue, "/v1/completions", prompt="c", max_tokens=2)
    thread.join(120)
    assert lone.status_code == 503, lone.text
    assert replies["fan"].status_code == 200 and len(replies["fan"].json()["choices"]) == 8


def test_the_groups_reserve_take_and_give_back() -> None:
    now = [0.0]
    groups = FanOutGroups(clock=lambda: now[0])
    assert groups.reserve("g", 3) == 3 and groups.take("g") and groups.take("g")
    assert not groups.take("g")  # all three came: a fourth call is a new request
    assert groups.reserve("h", 5) == 5 and groups.take("h")
    now[0] = WAIT_SECS + 1
    assert groups.expire() == 3 and not groups.holds("h")  # the three that never came


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("abc/4", ("abc", 4)), ("abc/1", None), (f"abc/{MAX_SIZE + 1}", None), ("a b/4", None)],
)
def test_the_metadata_value_parses(value: str, parsed: tuple[str, int] | None) -> None:
    assert parse_fan_out(value) == parsed
