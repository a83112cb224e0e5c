"""The core through real gRPC stubs: generation, streaming, ErrorInfo, health, reflection."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from mlx_responses.v1 import compaction_service_pb2 as cp
from mlx_responses.v1 import compaction_service_pb2_grpc as cp_grpc
from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import generation_service_pb2 as gen
from mlx_responses.v1 import generation_service_pb2_grpc as gen_grpc
from mlx_responses.v1 import responses_pb2 as pb
from tests.support.stack import Stack


@pytest.fixture(scope="module")
def channel(stack: Stack) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(stack.grpc_address) as ch:
        yield ch


def _params(stack: Stack, text: str, **fields: object) -> pb.CreateResponseParams:
    return pb.CreateResponseParams(
        model=stack.settings.models[0].name,
        input=[
            pb.Item(
                message=pb.MessageItem(
                    role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text=text))]
                )
            )
        ],
        **fields,  # type: ignore[arg-type]
    )


def test_create_response(stack: Stack, channel: grpc.Channel) -> None:
    stub = gen_grpc.GenerationServiceStub(channel)
    reply = stub.CreateResponse(
        gen.CreateResponseRequest(params=_params(stack, "Reply with: hello", max_output_tokens=16))
    )
    r = reply.response
    assert r.status == pb.RESPONSE_STATUS_COMPLETED
    assert r.output[0].message.content[0].output_text.text == "hello"
    assert r.usage.input_tokens > 0


def test_stream_response_events(stack: Stack, channel: grpc.Channel) -> None:
    stub = gen_grpc.GenerationServiceStub(channel)
    events = [
        e
        for message in stub.StreamResponse(
            gen.StreamResponseRequest(
                params=_params(stack, "Reply with: world", max_output_tokens=16)
            )
        )
        for e in message.events
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == ev.EVENT_TYPE_RESPONSE_CREATED
    assert events[-1].type == ev.EVENT_TYPE_RESPONSE_COMPLETED
    text = "".join(e.text_delta.delta for e in events if e.type == ev.EVENT_TYPE_OUTPUT_TEXT_DELTA)
    assert text == "world"


def test_errors_carry_error_info(stack: Stack, channel: grpc.Channel) -> None:
    stub = gen_grpc.GenerationServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.CreateResponse(gen.CreateResponseRequest(params=_params(stack, "x", temperature=9.0)))
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert info.reason == "INVALID_REQUEST"
    assert info.domain == "mlx-responses"
    assert info.metadata["param"] == "temperature"


def test_unknown_model_is_not_found(stack: Stack, channel: grpc.Channel) -> None:
    stub = gen_grpc.GenerationServiceStub(channel)
    params = _params(stack, "x")
    params.model = "nope"
    with pytest.raises(grpc.RpcError) as caught:
        stub.CreateResponse(gen.CreateResponseRequest(params=params))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]


def test_count_input_tokens_and_models(stack: Stack, channel: grpc.Channel) -> None:
    stub = gen_grpc.GenerationServiceStub(channel)
    short = stub.CountInputTokens(gen.CountInputTokensRequest(params=_params(stack, "hi")))
    long = stub.CountInputTokens(
        gen.CountInputTokensRequest(params=_params(stack, "hi there, how are you today"))
    )
    assert 0 < short.input_tokens < long.input_tokens
    models = stub.ListModels(gen.ListModelsRequest()).models
    assert [m.id for m in models] == [stack.settings.models[0].name]


def test_health_is_serving(channel: grpc.Channel) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    for service in ("", "mlx_responses.v1.GenerationService"):
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_every_service(channel: grpc.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    replies = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")])
    )
    names = {s.name for r in replies for s in r.list_services_response.service}
    assert {
        "mlx_responses.v1.GenerationService",
        "mlx_responses.v1.StorageService",
        "mlx_responses.v1.JobsService",
        "mlx_responses.v1.CompactionService",
        "mlx_responses.v1.EmbeddingsService",
        "grpc.health.v1.Health",
    } <= names


def test_compaction_service(stack: Stack, channel: grpc.Channel) -> None:
    stub = cp_grpc.CompactionServiceStub(channel)
    params = _params(stack, "Reply with: rain")
    for word in ("snow", "wind", "sun", "cloud", "storm", "moon"):
        params.input.extend(_params(stack, f"Reply with: {word} and {word} again").input)
        params.input.append(
            pb.Item(
                message=pb.MessageItem(
                    role=pb.ROLE_ASSISTANT,
                    content=[pb.ContentPart(output_text=pb.OutputText(text=word))],
                )
            )
        )
    params.input.extend(_params(stack, "Reply with: hello").input)
    params.max_output_tokens = 8
    reply = stub.CompactResponse(cp.CompactResponseRequest(params=params, keep_tokens=16))
    assert reply.id.startswith("cmp_") and reply.model == stack.settings.models[0].name
    assert reply.output[-1].WhichOneof("item") == "compaction"
    assert reply.output[-2] == params.input[-1]  # the latest user message, verbatim
    assert 1 <= reply.usage.output_tokens <= 8
    with pytest.raises(grpc.RpcError) as caught:
        stub.CompactResponse(cp.CompactResponseRequest(params=params, keep_tokens=0))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]


def test_stream_response_compacts_with_typed_events(short_context_stack: Stack) -> None:
    """On a 2,048-token context: compaction keeps a sixteenth of it by default."""
    stack = short_context_stack
    with grpc.insecure_channel(stack.grpc_address) as channel:
        events = _compacting_stream(stack, channel)
    assert [e.type for e in events[1:4]] == [
        ev.EVENT_TYPE_RESPONSE_IN_PROGRESS,
        ev.EVENT_TYPE_COMPACTION_STARTED,
        ev.EVENT_TYPE_COMPACTION_COMPLETED,
    ]
    started, completed = events[2].compaction_started, events[3].compaction_completed
    final = events[-1].snapshot.response
    assert started.response_id == completed.response_id == final.id
    assert started.input_tokens == completed.input_tokens_before > completed.input_tokens_after
    assert final.output[0].WhichOneof("item") == "compaction"
    assert final.usage.input_tokens == completed.input_tokens_after


def _compacting_stream(stack: Stack, channel: grpc.Channel) -> list[ev.ResponseEvent]:
    stub = gen_grpc.GenerationServiceStub(channel)
    params = _params(stack, "Reply with: rain")
    for word in ("snow", "wind", "sun", "cloud", "storm", "moon", "star", "tree") * 2:
        params.input.extend(_params(stack, f"Reply with: {word}, then {word} again").input)
    params.context_management.append(pb.ContextManagement(type="compaction", compact_threshold=20))
    params.max_output_tokens = 8
    request = gen.StreamResponseRequest(params=params)
    return [e for message in stub.StreamResponse(request) for e in message.events]


def test_watch_job_streams_until_terminal(random_stack: Stack) -> None:
    from mlx_responses.v1 import jobs_service_pb2 as jobs
    from mlx_responses.v1 import jobs_service_pb2_grpc as jobs_grpc

    with grpc.insecure_channel(random_stack.grpc_address) as channel:
        stub = jobs_grpc.JobsServiceStub(channel)
        params = _params(random_stack, "go", max_output_tokens=40, temperature=0.0, background=True)
        queued = stub.CreateJob(jobs.CreateJobRequest(params=params)).response
        assert queued.status == pb.RESPONSE_STATUS_QUEUED and queued.background
        events = [e for m in stub.WatchJob(jobs.WatchJobRequest(id=queued.id)) for e in m.events]
        assert events[-1].type == ev.EVENT_TYPE_RESPONSE_INCOMPLETE
        numbers = [e.sequence_number for e in events]
        assert numbers == sorted(numbers)
        again = [e for m in stub.WatchJob(jobs.WatchJobRequest(id=queued.id)) for e in m.events]
        assert [e.type for e in again] == [ev.EVENT_TYPE_RESPONSE_INCOMPLETE]
        assert again[0].snapshot.response.usage.output_tokens == 40
        with pytest.raises(grpc.RpcError) as caught:
            list(stub.WatchJob(jobs.WatchJobRequest(id="resp_nope")))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
