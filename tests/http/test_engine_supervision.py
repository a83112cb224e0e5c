"""An engine that fails, over HTTP and gRPC health (service/engine/supervision.py, the pool).

A failure of the engine fails the response in hand (200, `status: failed`, a server_error saying
the engine was restarted) and the next request completes; before, every later request was a
503 "the generation worker is not running" until the process restarted. An engine that keeps
failing unloads its model: the model's health entry turns NOT_SERVING (the core's stays
SERVING), `GET /v1/models` says why and when it loads again, its requests are 503s naming the
failure until then, and the first request after loads it and completes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mlx_responses.service.engine import worker as worker_module
from mlx_responses.service.engine.supervision import Restarts
from mlx_responses.service.models.pool import health_name

from tests.http.test_models import metric, post
from tests.support.stack import Stack

StackFactory = Callable[..., Stack]


def _fail_admissions(monkeypatch: pytest.MonkeyPatch, times: int) -> None:
    """The engine's admission (its prompt-cache look-up) raises on its next `times` calls."""
    original = worker_module.look_up
    calls = 0

    def failing(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls <= times:
            raise RuntimeError(f"injected failure {calls}")
        return original(*args)

    monkeypatch.setattr(worker_module, "look_up", failing)


def _respond(stack: Stack, model: str) -> httpx.Response:
    return post(stack, "/v1/responses", model=model, input="Say hello", max_output_tokens=8)


def _health(stack: Stack, service: str) -> int:
    with grpc.insecure_channel(stack.grpc_address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    return int(reply.status)


def _listed(stack: Stack, model: str) -> dict[str, Any]:
    reply = httpx.get(f"{stack.base_url}/v1/models/{model}", timeout=10)
    assert reply.status_code == 200, reply.text
    listed: dict[str, Any] = reply.json()
    return listed


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def test_an_engine_failure_fails_the_response_in_hand_and_the_next_completes(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = make_stack()
    model = stack.core.models.default.id  # type: ignore[union-attr]
    _fail_admissions(monkeypatch, 1)
    failed = _respond(stack, model)
    assert failed.status_code == 200, failed.text
    body = failed.json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == "server_error"
    assert body["error"]["message"].startswith(
        "The engine failed and was restarted (RuntimeError: injected failure 1)"
    )
    after = _respond(stack, model)
    assert after.status_code == 200, after.text
    assert after.json()["status"] == "completed"
    assert _health(stack, health_name(model)) == SERVING
    assert _listed(stack, model)["failure"] is None
    failures = "mlx_responses_engine_failures_total"
    assert metric(stack, failures, model_name=model, outcome="restarted") == 1


def test_an_engine_that_keeps_failing_is_unloaded_reported_and_reloaded_after_a_back_off(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = make_stack()
    assert stack.core is not None
    pool = stack.core.models
    pool.backoff = 240.0  # minutes: the refusal below cannot outlast it
    model = pool.default.id
    assert pool.default.runtime is not None
    pool.default.runtime.worker.restarts = Restarts(limit=2, window=60)
    _fail_admissions(monkeypatch, 2)
    before = time.time()
    assert _respond(stack, model).json()["status"] == "failed"
    stopped = _respond(stack, model).json()
    assert stopped["status"] == "failed"
    assert stopped["error"]["message"].startswith("The engine failed repeatedly and was stopped")

    deadline = time.monotonic() + 30
    while _listed(stack, model)["loaded"]:
        assert time.monotonic() < deadline, "the failed model was never unloaded"
        time.sleep(0.05)
    listed = _listed(stack, model)
    reason = "2 engine failures within 60s, the last RuntimeError: injected failure 2"
    assert listed["failure"]["message"] == reason
    assert listed["failure"]["reload_after"] >= before + pool.backoff  # Unix seconds
    assert _health(stack, health_name(model)) == NOT_SERVING
    unloads = "mlx_responses_model_unloads_total"
    assert metric(stack, unloads, model_name=model, reason="failed") == 1
    failures = "mlx_responses_engine_failures_total"
    assert metric(stack, failures, model_name=model, outcome="stopped") == 1
    assert _health(stack, "") == SERVING  # the core serves on (and reloads it on a request)
    assert httpx.get(f"{stack.base_url}/health", timeout=10).status_code == 200

    refused = _respond(stack, model)
    assert refused.status_code == 503, refused.text
    assert reason in refused.json()["error"]["message"]

    failure = pool.default.failure
    assert failure is not None
    failure.reload_after = time.time()  # the back-off ends (instead of waiting minutes)
    reloaded = _respond(stack, model)
    assert reloaded.status_code == 200, reloaded.text
    assert reloaded.json()["status"] == "completed"
    assert _listed(stack, model)["failure"] is None
    assert _listed(stack, model)["loaded"] is True
    assert _health(stack, health_name(model)) == SERVING
