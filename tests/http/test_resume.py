"""Following a background response as a stream and resuming it
(`GET /v1/responses/{id}?stream=true&starting_after=N`) through the OpenAI SDK, on the memory
store and on Redis."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.http.test_conformance import _check_events
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


@pytest.fixture(scope="module", params=["memory", "redis"])
def long_stack(request: pytest.FixtureRequest, random_model: Path) -> Iterator[Stack]:
    """The random model (it generates until its cap) on each store.

    One delta per decode step (no coalescing window), so a job's event count does not depend on
    how loaded the machine is and a resume can start in the middle of its text.
    """
    url = "memory"
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        url = server.url(5)
    with Stack.running(model_path=random_model, store_url=url, stream_window_ms=0) as s:
        yield s


def _sdk(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def _background(stack: Stack, tokens: int) -> str:
    resp = _sdk(stack).responses.create(
        model=stack.settings.models[0].name,
        input="go",
        background=True,
        max_output_tokens=tokens,
    )
    assert resp.status == "queued"
    return resp.id


def _dump(event: Any) -> dict[str, Any]:
    return dict(event.model_dump(exclude_unset=True))


def _follow(stack: Stack, rid: str, **query: Any) -> list[dict[str, Any]]:
    with _sdk(stack).responses.retrieve(rid, stream=True, **query) as events:
        return [_dump(e) for e in events]


def test_follow_then_resume_replays_the_same_events(long_stack: Stack) -> None:
    rid = _background(long_stack, 48)
    full = _follow(long_stack, rid)
    assert [e["sequence_number"] for e in full] == list(range(len(full)))
    assert full[-1]["type"] in TERMINAL and full[-1]["response"]["id"] == rid
    # Several deltas (how many depends on how far the consumer lags: ready tokens merge), so
    # starting_after=5 below lands inside the text.
    assert sum(e["type"] == "response.output_text.delta" for e in full) >= 2
    _check_events(full)
    # A finished job replays its whole list, or the rest after any sequence number.
    assert _follow(long_stack, rid) == full
    assert _follow(long_stack, rid, starting_after=5) == full[6:]
    assert _follow(long_stack, rid, starting_after=len(full) - 1) == []


def test_a_dropped_stream_resumes_live_without_gaps_or_repeats(long_stack: Stack) -> None:
    rid = _background(long_stack, 400)
    seen: list[dict[str, Any]] = []
    with _sdk(long_stack).responses.retrieve(rid, stream=True) as events:
        for event in events:
            seen.append(_dump(event))
            if len(seen) == 8:
                break  # the client drops the connection mid-job
    status = _sdk(long_stack).responses.retrieve(rid).status
    assert status == "in_progress", "the job ended before the resume; raise max_output_tokens"
    rest = _follow(long_stack, rid, starting_after=seen[-1]["sequence_number"])
    both = seen + rest
    assert [e["sequence_number"] for e in both] == list(range(len(both)))
    assert both[-1]["type"] in TERMINAL
    # The same events as a full replay, every one exactly once.
    assert _follow(long_stack, rid) == both


def test_bad_resumes_are_openai_errors(long_stack: Stack) -> None:
    client = _sdk(long_stack)
    rid = _background(long_stack, 8)
    full = _follow(long_stack, rid)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.retrieve(rid, stream=True, starting_after=len(full))
    assert caught.value.body["param"] == "starting_after"  # type: ignore[index]
    url = f"{long_stack.base_url}/v1/responses/{rid}"
    for value, status in (("-1", 400), ("x", 400)):
        reply = httpx.get(url, params={"stream": "true", "starting_after": value})
        assert reply.status_code == status and reply.json()["error"]["param"] == "starting_after"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_unknown", stream=True)
    # A foreground response was never a background one: nothing to follow.
    foreground = client.responses.create(
        model=long_stack.settings.models[0].name, input="go", max_output_tokens=2
    )
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.retrieve(foreground.id, stream=True)
    assert caught.value.body["param"] == "stream"  # type: ignore[index]
    # The create-time refusal stays: create in the background, then follow with GET.
    body = {"model": long_stack.settings.models[0].name, "input": "go"}
    reply = httpx.post(
        f"{long_stack.base_url}/v1/responses", json={**body, "background": True, "stream": True}
    )
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "stream"
    # Deleting the response drops its events with it.
    client.responses.delete(rid)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(rid, stream=True)


def test_a_cancelled_job_ends_its_stream(long_stack: Stack) -> None:
    client = _sdk(long_stack)
    rid = _background(long_stack, 2000)
    seen: list[dict[str, Any]] = []
    with client.responses.retrieve(rid, stream=True) as events:
        for event in events:
            seen.append(_dump(event))
            if len(seen) == 4:
                client.responses.cancel(rid)
    assert seen[-1]["type"] == "response.failed"
    assert seen[-1]["response"]["status"] == "cancelled"
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert _follow(long_stack, rid) == seen


def test_the_sse_wire_format(long_stack: Stack) -> None:
    rid = _background(long_stack, 4)
    deadline = time.monotonic() + 60
    url = f"{long_stack.base_url}/v1/responses/{rid}"
    with httpx.stream("GET", url, params={"stream": "true"}, timeout=60) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
    assert time.monotonic() < deadline
    assert json.loads(lines[-1][6:])["type"] in TERMINAL
