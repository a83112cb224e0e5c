"""Background create as the seed words it: a read request runs even if its caller leaves, a full
generation queue is a 503 at create, and `in_progress` means the engine took the job."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from mlx_responses.v1 import jobs_service_pb2 as jobs
from mlx_responses.v1 import jobs_service_pb2_grpc as jobs_grpc
from mlx_responses.v1 import responses_pb2 as pb
from tests.support.stack import Stack
from tests.support.waits import until


def _post(stack: Stack, **fields: Any) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, "input": "go on", **fields}
    return httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)


def _status(stack: Stack, rid: str) -> str:
    status: str = httpx.get(f"{stack.base_url}/v1/responses/{rid}", timeout=30).json()["status"]
    return status


def test_a_create_whose_caller_leaves_still_runs(
    make_stack: Any, model_path: Path, random_model: Path
) -> None:
    # One model loaded at a time, and the loaded one busy: the tiny model's create waits for
    # it well past its caller's deadline.
    stack: Stack = make_stack(models=(random_model, model_path), max_loaded_models=1)
    holder = _post(stack, background=True, max_output_tokens=100000).json()
    text = pb.ContentPart(input_text=pb.InputText(text="go"))
    params = pb.CreateResponseParams(
        model=model_path.name,
        input=[pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[text]))],
        max_output_tokens=4,
        background=True,
    )
    with grpc.insecure_channel(stack.grpc_address) as channel:
        stub = jobs_grpc.JobsServiceStub(channel)
        with pytest.raises(grpc.RpcError) as gone:
            stub.CreateJob(jobs.CreateJobRequest(params=params), timeout=0.5)
        assert gone.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    httpx.post(f"{stack.base_url}/v1/responses/{holder['id']}/cancel", timeout=30)
    assert stack.core is not None
    pool = stack.core.models.models

    def ran() -> bool:
        runtime = pool[model_path.name].runtime
        return runtime is not None and runtime.worker.stats.completed == 1

    until(ran, "the tiny model's job ran")


@pytest.fixture
def one_slot(make_stack: Any, random_model: Path) -> Stack:
    stack: Stack = make_stack(model=random_model, max_batch_size=1, max_queued_requests=1)
    return stack


def test_in_progress_only_once_the_engine_takes_the_job(one_slot: Stack) -> None:
    holder = _post(one_slot, background=True, max_output_tokens=100000).json()
    until(lambda: _status(one_slot, holder["id"]) == "in_progress", "the holder running")
    job = _post(one_slot, background=True, max_output_tokens=4).json()
    assert job["status"] == "queued"
    # The job reached the engine and waits for the only batch slot: the engine decodes on
    # for the holder alone, pass after pass, and the job stays queued.
    assert one_slot.core is not None
    worker = one_slot.core.models.default.runtime.worker  # type: ignore[union-attr]
    stats = one_slot.engine_stats
    until(lambda: worker.in_flight == 2, "the job submitted to the engine")
    steps = stats.decode_steps
    until(lambda: stats.decode_steps >= steps + 8, "the engine decoding on")
    assert (stats.running, stats.batch_size) == (1, 1)  # the holder decodes alone
    assert _status(one_slot, job["id"]) == "queued"
    httpx.post(f"{one_slot.base_url}/v1/responses/{holder['id']}/cancel", timeout=30)
    until(lambda: _status(one_slot, job["id"]) != "queued", "the job taken")
    final = one_slot
    until(lambda: _status(final, job["id"]) in ("completed", "incomplete"), "the job done")


def test_a_full_queue_is_503_at_create(make_stack: Any, random_model: Path) -> None:
    stack: Stack = make_stack(model=random_model, max_batch_size=1, max_queued_requests=0)
    holder = _post(stack, background=True, max_output_tokens=100000).json()
    until(lambda: stack.engine_stats.generated_tokens > 0, "the holder decoding")
    refused = _post(stack, background=True, max_output_tokens=4)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "server_overloaded"
    httpx.post(f"{stack.base_url}/v1/responses/{holder['id']}/cancel", timeout=30)
    until(lambda: stack.engine_stats.active == 0, "the engine idle")
    accepted = _post(stack, background=True, max_output_tokens=4)
    assert accepted.status_code == 200, accepted.text


def _post_and_close(stack: Stack, body: dict[str, Any]) -> None:
    """Sends a whole POST /v1/responses on a raw socket and closes it at once (FIN), unread."""
    raw = json.dumps(body).encode()
    request = (
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(raw)}\r\n\r\n".encode()
        + raw
    )
    with socket.create_connection(("127.0.0.1", stack.http_port), timeout=30) as sock:
        sock.sendall(request)


def test_a_create_whose_socket_closes_after_the_body_still_runs(stack: Stack) -> None:
    """Issue #41: the façade cancelled the create (no job) when the client closed its socket
    right after the last byte of the body; the job now runs and appends its turn."""
    model = stack.settings.models[0].name
    conversation = httpx.post(f"{stack.base_url}/v1/conversations", json={}, timeout=30).json()
    body = {
        "model": model,
        "input": "Reply with: hello",
        "max_output_tokens": 8,
        "background": True,
        "conversation": conversation["id"],
    }
    _post_and_close(stack, body)
    items_url = f"{stack.base_url}/v1/conversations/{conversation['id']}/items"

    def turn() -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = httpx.get(items_url, timeout=30).json()["data"]
        return [i for i in data if i.get("role") == "assistant"]

    until(turn, "the turn appended")
    assert turn()[0]["content"][0]["text"] == "hello"
