"""405 lists `Allow`; /openapi.json requires what the server requires; the drain counts right."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from mlx_responses.http_facade.kit.drain import STREAMS, DrainReport

from tests.support.stack import Stack

RESPONSE_ID = re.compile(r'"id":\s*"(resp_[0-9a-f]+)"')


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/responses", {"POST"}),
        ("DELETE", "/health", {"GET"}),
        ("PATCH", "/v1/responses/resp_1", {"GET", "DELETE", "HEAD"}),
        ("POST", "/v1/models", {"GET", "HEAD"}),
    ],
)
def test_405_carries_allow(stack: Stack, method: str, path: str, allowed: set[str]) -> None:
    reply = httpx.request(method, f"{stack.base_url}{path}", timeout=10)
    assert reply.status_code == 405
    assert reply.json()["error"]["code"] == "method_not_allowed"
    assert {m.strip() for m in reply.headers["Allow"].split(",")} >= allowed - {"HEAD"}


def test_openapi_requires_model_where_the_server_does(stack: Stack) -> None:
    document = httpx.get(f"{stack.base_url}/openapi.json", timeout=10).json()
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body_ref = (
                operation.get("requestBody", {})
                .get("content", {})
                .get("application/json", {})
                .get("schema")
            )
            if body_ref is None or not str(body_ref.get("$ref", "")).endswith(
                ("/CreateResponseRequest", "/CompactRequest")
            ):
                continue  # bodies without a model (conversations)
            schema = {**body_ref, "components": document["components"]}
            validator = Draft202012Validator(schema)
            for model in (None, "", 7):
                body: dict[str, Any] = {"input": "hi", "model": model}
                reply = httpx.request(method, f"{stack.base_url}{path}", json=body, timeout=30)
                assert reply.status_code == 400, (path, model, reply.text)
                assert not validator.is_valid(body), (path, model)
                checked += 1
    assert checked == 6 * 3  # create, input_tokens and compact, /v1 and bare


def test_the_drain_counts_streams_that_ended_cancelled(random_stack: Stack) -> None:
    assert random_stack.runner is not None
    streams = random_stack.runner.app[STREAMS]
    ids: dict[int, str] = {}

    def follow(i: int, max_tokens: int) -> None:
        body = {
            "model": random_stack.settings.models[0].name,
            "input": "go",
            "stream": True,
            "max_output_tokens": max_tokens,
        }
        with httpx.stream(
            "POST", f"{random_stack.base_url}/v1/responses", json=body, timeout=60
        ) as reply:
            for line in reply.iter_lines():
                found = RESPONSE_ID.search(line)
                if i not in ids and found is not None:
                    ids[i] = found.group(1)

    threads = [threading.Thread(target=follow, args=(i, n)) for i, n in enumerate((10**5,) * 2)]
    threads.append(threading.Thread(target=follow, args=(2, 40)))
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    # The two long streams' ids (the short one's may come first).
    while (len(streams) < 3 or not {0, 1} <= ids.keys()) and time.monotonic() < deadline:
        time.sleep(0.01)

    async def start_drain() -> asyncio.Task[DrainReport]:
        task = asyncio.ensure_future(streams.drain(20))
        await asyncio.sleep(0)  # it has seen the open streams (under load, the cancels below
        return task  # could otherwise end them before the drain started)

    async def report_of(task: asyncio.Task[DrainReport]) -> DrainReport:
        return await task

    loop = random_stack._loop
    drain = asyncio.run_coroutine_threadsafe(start_drain(), loop).result(30)
    for i in (0, 1):  # cancelled while the drain waits, as a core's own drain would
        httpx.post(f"{random_stack.base_url}/v1/responses/{ids[i]}/cancel", timeout=30)
    report = asyncio.run_coroutine_threadsafe(report_of(drain), loop).result(60)
    for thread in threads:
        thread.join(30)
    assert report == DrainReport(finished=1, cancelled=2)
