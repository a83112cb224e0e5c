"""Background mode: queued create, polling, limits (400/429/503-as-failed), cancel, chaining."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.stack import Stack
from tests.support.waits import until


def _create(stack: Stack, **fields: Any) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, "background": True, **fields}
    return httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)


def _poll(stack: Stack, rid: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(f"{stack.base_url}/v1/responses/{rid}", timeout=30).json()
        if body["status"] not in ("queued", "in_progress"):
            return body
        assert body["output"] == []
        assert body["usage"]["output_tokens"] == 0
        time.sleep(0.02)
    raise AssertionError("job never finished")


def _chain(stack: Stack, previous: str, **fields: Any) -> httpx.Response:
    """A foreground turn continuing from `previous`."""
    body = {"model": stack.settings.models[0].name, "input": "x", **fields}
    body["previous_response_id"] = previous
    return httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)


def _error(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    return reply.json()["error"]


def test_background_job_completes(stack: Stack) -> None:
    reply = _create(stack, input="Reply with: hello", max_output_tokens=16)
    assert reply.status_code == 200
    queued = reply.json()
    assert queued["status"] == "queued" and queued["background"] is True
    assert queued["output"] == [] and queued["usage"]["total_tokens"] == 0
    final = _poll(stack, queued["id"])
    assert final["status"] == "completed" and final["background"] is True
    assert final["output"][0]["content"][0]["text"] == "hello"
    assert final["usage"]["output_tokens"] >= 1


def test_sdk_background_and_retrieve(stack: Stack) -> None:
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    resp = client.responses.create(
        model=stack.settings.models[0].name, input="Reply with: world", background=True
    )
    assert resp.status == "queued" and resp.background is True
    rid = resp.id
    resp = until(
        lambda: (r := client.responses.retrieve(rid)).status == "completed" and r, "completed"
    )
    assert resp.output_text == "world"


def test_background_with_stream_is_400(stack: Stack) -> None:
    error = _error(_create(stack, input="x", stream=True), 400)
    assert error["type"] == "invalid_request_error" and error["param"] == "stream"


def test_background_refusals_before_any_job(stack: Stack) -> None:
    error = _error(_create(stack, input="x", temperature=9), 400)
    assert error["param"] == "temperature"
    error = _error(_create(stack, input="x", previous_response_id="resp_nope"), 400)
    assert error["param"] == "previous_response_id"
    _error(_create(stack, input="x", model="nope"), 404)


@pytest.mark.parametrize(
    "settings",
    [
        {"responses_background_max_jobs": 0},
        {"responses_store_max_entries": 0},
        {"responses_store_max_bytes": 0},
    ],
    ids=["no-jobs", "no-store", "no-bytes"],
)
def test_background_disabled(make_stack: Any, settings: dict[str, int]) -> None:
    stack = make_stack(**settings)
    error = _error(_create(stack, input="Reply with: hello"), 400)
    assert error["param"] == "background"
    assert (
        httpx.post(
            f"{stack.base_url}/v1/responses",
            json={"model": stack.settings.models[0].name, "input": "Reply with: hello"},
            timeout=60,
        ).status_code
        == 200
    )


def _long(stack: Stack, **fields: Any) -> httpx.Response:
    body = {"input": "go", "max_output_tokens": 100000, "temperature": 0, **fields}
    return _create(stack, **body)


def test_job_limit_is_429(make_stack: Any, random_model: Path) -> None:
    stack = make_stack(model=random_model, responses_background_max_jobs=1)
    first = _long(stack).json()
    error = _error(_long(stack), 429)
    assert error["code"] == "rate_limit_exceeded"
    cancelled = httpx.post(f"{stack.base_url}/v1/responses/{first['id']}/cancel", timeout=30)
    assert cancelled.json()["status"] == "cancelled"
    assert _long(stack).status_code == 200


def test_active_bytes_over_budget_is_429(make_stack: Any, random_model: Path) -> None:
    stack = make_stack(model=random_model, responses_store_max_bytes=3000)
    first = _long(stack, input="word " * 300)
    assert first.status_code == 200, first.text
    error = _error(_long(stack, input="word " * 300), 429)
    assert error["code"] == "rate_limit_exceeded"
    httpx.post(f"{stack.base_url}/v1/responses/{first.json()['id']}/cancel", timeout=30)


def test_cancel_delete_and_chaining_of_a_running_job(random_stack: Stack) -> None:
    stack = random_stack
    job = _long(stack).json()
    time.sleep(0.1)
    error = _error(httpx.delete(f"{stack.base_url}/v1/responses/{job['id']}"), 400)
    assert "cancel it first" in error["message"]
    error = _error(
        _chain(stack, job["id"]),
        400,
    )
    assert error["message"].startswith(
        f"previous response '{job['id']}' has not finished (status: "
    )
    polled = httpx.get(f"{stack.base_url}/v1/responses/{job['id']}").json()
    assert polled["output"] == [] and polled["usage"]["output_tokens"] == 0
    cancelled = httpx.post(f"{stack.base_url}/v1/responses/{job['id']}/cancel", timeout=30).json()
    assert cancelled["status"] == "cancelled" and cancelled["background"] is True
    assert _poll(stack, job["id"])["status"] == "cancelled"
    chained = _chain(stack, job["id"], max_output_tokens=2)
    assert chained.status_code == 200
    assert httpx.delete(f"{stack.base_url}/v1/responses/{job['id']}").json()["deleted"] is True


def test_finished_job_chains(stack: Stack) -> None:
    job = _create(stack, input="Reply with: paris").json()
    _poll(stack, job["id"])
    reply = _chain(stack, job["id"], input="Reply with: tokyo").json()
    assert reply["output"][0]["content"][0]["text"] == "tokyo"
    assert "background" not in reply


def test_store_false_job_is_pollable_but_not_chainable(stack: Stack) -> None:
    job = _create(stack, input="Reply with: rain", store=False).json()
    final = _poll(stack, job["id"])
    assert final["status"] == "completed" and final["store"] is False
    error = _error(
        _chain(stack, job["id"]),
        400,
    )
    assert error["param"] == "previous_response_id"


def test_ephemeral_ttl(make_stack: Any) -> None:
    stack = make_stack(responses_background_ephemeral_ttl_secs=1)
    job = _create(stack, input="Reply with: rain", store=False).json()
    assert _poll(stack, job["id"])["status"] == "completed"
    time.sleep(1.2)
    assert httpx.get(f"{stack.base_url}/v1/responses/{job['id']}").status_code == 404


def test_full_queue_is_503_at_create(make_stack: Any, random_model: Path) -> None:
    # Seed: create answers 503 when the generation queue is full, as a foreground request
    # (tests/http/test_background_admission.py has the details).
    stack = make_stack(model=random_model, max_batch_size=1, max_queued_requests=0)
    holder = _long(stack).json()
    until(lambda: stack.engine_stats.generated_tokens > 0, "the holder generating")
    error = _error(_create(stack, input="x", max_output_tokens=4), 503)
    assert error["code"] == "server_overloaded"
    httpx.post(f"{stack.base_url}/v1/responses/{holder['id']}/cancel", timeout=30)


def test_final_over_the_store_budget_fails_the_job_with_server_error(
    make_stack: Any, random_model: Path
) -> None:
    """In band: the final object does not fit the response store, so a failed stub is kept."""
    stack = make_stack(model=random_model, responses_store_max_bytes=1500)
    job = _create(stack, input="x", max_output_tokens=400)
    assert job.status_code == 200, job.text
    final = _poll(stack, job.json()["id"])
    assert final["status"] == "failed"
    assert final["error"] == {
        "code": "server_error",
        "message": "The final response is larger than the response store budget.",
    }


def test_a_poll_sees_no_final_before_it_is_kept(make_stack: Any, random_model: Path) -> None:
    """The final is kept (here: too big, so a failed stub) a while after generation ends; a poll
    in between sees the job still in progress, never the generation's own end."""
    stack = make_stack(model=random_model, responses_store_max_bytes=1500)
    assert stack.core is not None
    jobs = stack.core.jobs
    keep = jobs._keep
    ended, release = threading.Event(), threading.Event()

    async def held_keep(job: Any, final: Any) -> None:
        ended.set()  # the generation ended; its final waits to be kept
        await asyncio.to_thread(release.wait, 60)
        await keep(job, final)

    jobs._keep = held_keep  # type: ignore[method-assign]
    rid = _create(stack, input="x", max_output_tokens=400).json()["id"]
    url = f"{stack.base_url}/v1/responses/{rid}"
    until(ended.is_set, "the generation ended")
    try:
        assert httpx.get(url, timeout=30).json()["status"] == "in_progress"
    finally:
        release.set()
    assert _poll(stack, rid)["status"] == "failed"


def test_conversation_turn_appended_when_job_finishes(stack: Stack) -> None:
    job = _create(stack, input="Reply with: cat", conversation="conv_bg").json()
    _poll(stack, job["id"])
    count = httpx.post(
        f"{stack.base_url}/v1/responses/input_tokens",
        json={
            "model": stack.settings.models[0].name,
            "input": "Reply with: dog",
            "conversation": "conv_bg",
        },
    ).json()["input_tokens"]
    alone = httpx.post(
        f"{stack.base_url}/v1/responses/input_tokens",
        json={"model": stack.settings.models[0].name, "input": "Reply with: dog"},
    ).json()["input_tokens"]
    assert count > alone


def test_job_outlives_the_create_call(random_stack: Stack) -> None:
    results: list[str] = []

    def create() -> None:
        results.append(_long(random_stack, max_output_tokens=50).json()["id"])

    thread = threading.Thread(target=create)
    thread.start()
    thread.join(30)
    final = _poll(random_stack, results[0])
    assert final["status"] == "incomplete"
