"""The typed gRPC client (sync and async) against a real core: every RPC, errors as gRPC raises."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses_client import AsyncClient, Client, text_params
from tests.support.stack import Stack


def _text(response: pb.Response) -> str:
    return "".join(
        part.output_text.text
        for item in response.output
        if item.HasField("message")
        for part in item.message.content
    )


@pytest.fixture(scope="module")
def client(stack: Stack) -> Iterator[Client]:
    with Client.connect(stack.grpc_address) as c:
        yield c


def test_sync_create_get_delete_count_models(stack: Stack, client: Client) -> None:
    model = stack.settings.models[0].name
    assert client.serving()
    assert [m.id for m in client.list_models()] == [model]
    params = text_params(model, "Reply with: hello", max_output_tokens=16)
    response = client.create(params, metadata=[("x-request-id", "client-test")])
    assert response.status == pb.RESPONSE_STATUS_COMPLETED
    assert _text(response) == "hello"
    assert client.count_input_tokens(params) == response.usage.input_tokens
    assert client.get_response(response.id).id == response.id
    assert client.delete_response(response.id).deleted
    with pytest.raises(grpc.RpcError) as missing:
        client.get_response(response.id)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_sync_stream_and_job(stack: Stack, client: Client) -> None:
    model = stack.settings.models[0].name
    batches = list(client.stream(text_params(model, "Reply with: world")))
    events = [e for batch in batches for e in batch]
    assert events[0].type == ev.EVENT_TYPE_RESPONSE_CREATED
    assert events[-1].type == ev.EVENT_TYPE_RESPONSE_COMPLETED
    assert _text(events[-1].snapshot.response) == "world"
    job = client.create_job(text_params(model, "Reply with: hello"))
    assert job.status == pb.RESPONSE_STATUS_QUEUED
    watched = [e for batch in client.watch_job(job.id) for e in batch]
    final = client.get_response(job.id)
    assert final.status == pb.RESPONSE_STATUS_COMPLETED
    if watched:  # the job may have finished before the watch began
        assert watched[-1].snapshot.response.status == pb.RESPONSE_STATUS_COMPLETED


def test_sync_refusal_raises_with_the_core_status(stack: Stack, client: Client) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        list(client.stream(text_params("no-such-model", "hi")))
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND


async def test_async_client_every_rpc_kind(stack: Stack) -> None:
    model = stack.settings.models[0].name
    async with AsyncClient.connect(stack.grpc_address) as client:
        assert await client.serving()
        assert [m.id for m in await client.list_models()] == [model]
        response = await client.create(text_params(model, "Reply with: hello"))
        assert _text(response) == "hello"
        stream = client.stream(text_params(model, "Reply with: world"))
        events = [e async for batch in stream for e in batch]
        assert _text(events[-1].snapshot.response) == "world"
        refused = client.stream(text_params("no-such-model", "hi"))
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await refused.first()
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert (await client.get_response(response.id)).id == response.id
        job = await client.create_job(text_params(model, "Reply with: hello"))
        watched = [e async for batch in client.watch_job(job.id) for e in batch]
        assert (await client.get_response(job.id)).status == pb.RESPONSE_STATUS_COMPLETED
        if watched:
            assert watched[-1].snapshot.response.status == pb.RESPONSE_STATUS_COMPLETED
        with pytest.raises(grpc.aio.AioRpcError) as refused_compact:
            await client.compact(text_params(model, "hi", stream=True))
        assert refused_compact.value.code() == grpc.StatusCode.INVALID_ARGUMENT
