"""Capacity a client can see coming (issue #41): `--max-prompt-tokens` refuses an over-long prompt
before any prefill, and every 503 says when to retry, on every dialect."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.stack import Stack

BOUND = 40


def _routes(long: bool) -> dict[str, dict[str, Any]]:
    text = "word " * 200 if long else "hi"
    turn = [{"role": "user", "content": text}]
    return {
        "/v1/responses": {"input": text, "max_output_tokens": 4},
        "/v1/chat/completions": {"messages": turn, "max_tokens": 4},
        "/v1/completions": {"prompt": text, "max_tokens": 4},
        "/v1/messages": {"messages": turn, "max_tokens": 4},
    }


def _post(stack: Stack, path: str, **fields: Any) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, **fields}
    return httpx.post(f"{stack.base_url}{path}", json=body, timeout=60)


def _message(reply: httpx.Response) -> str:
    message: str = reply.json()["error"]["message"]
    return message


def test_an_over_long_prompt_is_a_400_naming_its_count_and_the_bound(make_stack: Any) -> None:
    stack: Stack = make_stack(max_prompt_tokens=BOUND)
    for path, fields in _routes(long=False).items():
        assert _post(stack, path, **fields).status_code == 200, path
    long = _routes(long=True)
    count = _post(stack, "/v1/responses/input_tokens", input=long["/v1/responses"]["input"])
    tokens = count.json()["input_tokens"]  # counting is never refused
    assert tokens > BOUND
    for path, fields in long.items():
        reply = _post(stack, path, **fields)
        assert reply.status_code == 400, (path, reply.text)
        assert f"limit of {BOUND} prompt tokens" in _message(reply), path
        if path == "/v1/messages":
            assert reply.json()["error"]["type"] == "invalid_request_error"
            continue
        error = reply.json()["error"]
        assert error["code"] == "context_length_exceeded" and error["param"] == "input", error
    responses = long["/v1/responses"]
    for mode in ({"stream": True}, {"background": True}):
        reply = _post(stack, "/v1/responses", **responses, **mode)
        assert reply.status_code == 400, (mode, reply.text)  # refused at create: no job, no stream
        assert _message(reply).startswith(f"The input is {tokens} tokens"), mode
    compact = _post(stack, "/v1/responses/compact", input=responses["input"])
    assert compact.status_code == 400 and f"limit of {BOUND}" in _message(compact)


def test_every_503_carries_retry_after(make_stack: Any, random_model: Path) -> None:
    stack: Stack = make_stack(model=random_model, max_batch_size=1, max_queued_requests=0)
    holder = _post(stack, "/v1/responses", input="go on", background=True, max_output_tokens=100000)
    deadline = time.monotonic() + 30
    while stack.engine_stats.generated_tokens == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    try:
        routes = _routes(long=False)
        refusals = [(path, fields) for path, fields in routes.items()]
        refusals.append(("/v1/responses", {**routes["/v1/responses"], "stream": True}))
        refusals.append(("/v1/responses", {**routes["/v1/responses"], "background": True}))
        for path, fields in refusals:
            reply = _post(stack, path, **fields)
            assert reply.status_code == 503, (path, fields, reply.text)
            assert reply.headers.get("Retry-After") == "1", (path, fields)
            if path == "/v1/messages":
                assert reply.json()["error"]["type"] == "overloaded_error"
            else:
                assert reply.json()["error"]["code"] == "server_overloaded", path
    finally:
        httpx.post(f"{stack.base_url}/v1/responses/{holder.json()['id']}/cancel", timeout=30)
