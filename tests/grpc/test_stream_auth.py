"""With --api-key, streaming RPCs without a key fail UNAUTHENTICATED; a stream over HTTP is 401."""

from __future__ import annotations

import logging
from typing import Any

import grpc
import httpx
import pytest

from mlx_responses.v1 import generation_service_pb2 as gen
from mlx_responses.v1 import generation_service_pb2_grpc as gen_grpc
from mlx_responses.v1 import jobs_service_pb2 as jobs
from mlx_responses.v1 import jobs_service_pb2_grpc as jobs_grpc
from mlx_responses.v1 import responses_pb2 as pb
from tests.support.stack import Stack

KEY = "sk-stream-auth-5c1d"


def _params(stack: Stack) -> pb.CreateResponseParams:
    text = pb.ContentPart(input_text=pb.InputText(text="Reply with: hi"))
    return pb.CreateResponseParams(
        model=stack.settings.models[0].name,
        input=[pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[text]))],
        max_output_tokens=4,
    )


@pytest.fixture
def keyed(make_stack: Any) -> Stack:
    stack: Stack = make_stack(api_keys=(KEY,))
    return stack


def test_streaming_rpcs_without_a_key_are_unauthenticated(
    keyed: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with grpc.insecure_channel(keyed.grpc_address) as channel:
        generation = gen_grpc.GenerationServiceStub(channel)
        watch = jobs_grpc.JobsServiceStub(channel)
        calls = [
            lambda: list(
                generation.StreamResponse(gen.StreamResponseRequest(params=_params(keyed)))
            ),
            lambda: list(watch.WatchJob(jobs.WatchJobRequest(id="resp_x"))),
            lambda: generation.CreateResponse(gen.CreateResponseRequest(params=_params(keyed))),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as refused:
                call()
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_streamed_http_request_without_a_key_is_401(keyed: Stack) -> None:
    body = {"model": keyed.settings.models[0].name, "input": "Reply with: hi"}
    plain = httpx.post(f"{keyed.base_url}/v1/responses", json=body, timeout=60)
    streamed = httpx.post(
        f"{keyed.base_url}/v1/responses", json={**body, "stream": True}, timeout=60
    )
    assert plain.status_code == 401, plain.text
    assert streamed.status_code == 401, streamed.text
    assert streamed.json()["error"]["code"] == plain.json()["error"]["code"]
    ok = httpx.post(
        f"{keyed.base_url}/v1/responses",
        json={**body, "stream": True},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert ok.status_code == 200 and "response.completed" in ok.text
