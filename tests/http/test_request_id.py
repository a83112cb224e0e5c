"""x-request-id: on every response, passed to the core as gRPC metadata, on the request's logs."""

from __future__ import annotations

import logging
import re

import httpx
import pytest
from mlx_responses.launcher.logs import RequestIdFilter

from tests.support.stack import Stack
from tests.support.waits import until

GENERATED = re.compile(r"req_[0-9a-f]{32}")


def _model(stack: Stack) -> str:
    return stack.settings.models[0].name


def test_generated_when_absent_and_distinct(stack: Stack) -> None:
    ids = [
        httpx.get(f"{stack.base_url}/v1/models", timeout=10).headers["x-request-id"] for _ in "ab"
    ]
    assert all(GENERATED.fullmatch(i) for i in ids)
    assert ids[0] != ids[1]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/health", None),
        ("GET", "/v1/nowhere", None),  # 404 from the router
        ("POST", "/v1/responses", {"input": 3}),  # 400 from validation
        ("GET", "/v1/responses/resp_missing", None),  # 404 from the core
        ("GET", "/metrics", None),
    ],
)
def test_client_id_echoed_on_every_kind_of_response(
    stack: Stack, method: str, path: str, body: object
) -> None:
    reply = httpx.request(
        method,
        f"{stack.base_url}{path}",
        json=body,
        headers={"X-Request-Id": "client-id.42"},
        timeout=10,
    )
    assert reply.headers["x-request-id"] == "client-id.42"


def test_unusable_client_id_is_replaced(stack: Stack) -> None:
    for bad in ("x" * 129, "has space", ""):
        reply = httpx.get(f"{stack.base_url}/v1/models", headers={"x-request-id": bad}, timeout=10)
        assert GENERATED.fullmatch(reply.headers["x-request-id"])


def test_streamed_response_carries_it_and_core_logs_it(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.handler.addFilter(RequestIdFilter())
    caplog.set_level(logging.INFO)
    body = {"model": _model(stack), "input": "Reply with: hello", "stream": True}
    with httpx.stream(
        "POST",
        f"{stack.base_url}/v1/responses",
        json=body,
        headers={"x-request-id": "trace-stream-1"},
        timeout=60,
    ) as reply:
        assert reply.status_code == 200
        assert reply.headers["x-request-id"] == "trace-stream-1"
        reply.read()

    def loggers_of_ours() -> set[str]:
        return {
            r.name for r in caplog.records if getattr(r, "request_id", None) == "trace-stream-1"
        }

    # The access line follows the stream's last byte.
    until(lambda: "mlx_responses.http_facade.access" in loggers_of_ours(), "the access line")
    loggers = loggers_of_ours()
    # The core's own log line (set from gRPC metadata on its side) and the façade's access line.
    assert "mlx_responses.service.responses.pipeline" in loggers
    assert "mlx_responses.http_facade.access" in loggers
    others = [
        r
        for r in caplog.records
        if r.name == "mlx_responses.service.responses.pipeline"
        and getattr(r, "request_id", None) != "trace-stream-1"
    ]
    assert others == []


def test_background_job_logs_carry_the_creating_request_id(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.handler.addFilter(RequestIdFilter())
    caplog.set_level(logging.INFO)
    body = {"model": _model(stack), "input": "Reply with: hello", "background": True}
    reply = httpx.post(
        f"{stack.base_url}/v1/responses", json=body, headers={"x-request-id": "job-7"}, timeout=60
    )
    response_id = reply.json()["id"]
    while httpx.get(f"{stack.base_url}/v1/responses/{response_id}", timeout=10).json()[
        "status"
    ] in ("queued", "in_progress"):
        pass
    finished = [
        r
        for r in caplog.records
        if r.name == "mlx_responses.service.responses.pipeline" and response_id in r.getMessage()
    ]
    assert finished and all(getattr(r, "request_id", None) == "job-7" for r in finished)
