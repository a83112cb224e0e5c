"""stop, seed, top_k and a raw prompt through real gRPC: the core serves them to every API,
Responses turns included (they are stored and chained like any other)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from mlx_responses.v1 import generation_service_pb2 as gen
from mlx_responses.v1 import generation_service_pb2_grpc as gen_grpc
from mlx_responses.v1 import responses_pb2 as pb
from tests.support.stack import Stack


@pytest.fixture(scope="module")
def stub(random_stack: Stack) -> Iterator[gen_grpc.GenerationServiceStub]:
    with grpc.insecure_channel(random_stack.grpc_address) as channel:
        yield gen_grpc.GenerationServiceStub(channel)


def _params(stack: Stack, **fields: object) -> pb.CreateResponseParams:
    text = pb.ContentPart(input_text=pb.InputText(text="Tell me about the sea."))
    return pb.CreateResponseParams(
        model=stack.settings.models[0].name,
        input=[pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[text]))],
        max_output_tokens=16,
        **fields,  # type: ignore[arg-type]
    )


def _text(response: pb.Response) -> str:
    return "".join(
        p.output_text.text
        for i in response.output
        if i.WhichOneof("item") == "message"
        for p in i.message.content
    )


def _create(stub: gen_grpc.GenerationServiceStub, params: pb.CreateResponseParams) -> pb.Response:
    return stub.CreateResponse(gen.CreateResponseRequest(params=params)).response


def test_stop_sequence_ends_a_responses_turn(
    random_stack: Stack, stub: gen_grpc.GenerationServiceStub
) -> None:
    whole = _create(stub, _params(random_stack, temperature=0))
    text = _text(whole)
    stop = text[5:8]
    cut = _create(stub, _params(random_stack, temperature=0, stop=[stop]))
    assert _text(cut) == text[: text.index(stop)]
    assert cut.status == pb.RESPONSE_STATUS_COMPLETED and cut.stop_sequence == stop
    assert not whole.HasField("stop_sequence")
    # Stored like any turn: the next one chains on it.
    follow = _create(stub, _params(random_stack, previous_response_id=cut.id))
    assert follow.status == pb.RESPONSE_STATUS_INCOMPLETE


def test_seed_reproduces_and_top_k_one_is_greedy(
    random_stack: Stack, stub: gen_grpc.GenerationServiceStub
) -> None:
    first = _text(_create(stub, _params(random_stack, temperature=1.0, seed=11)))
    assert _text(_create(stub, _params(random_stack, temperature=1.0, seed=11))) == first
    assert _text(_create(stub, _params(random_stack, temperature=1.0, seed=12))) != first
    greedy = _text(_create(stub, _params(random_stack, temperature=0)))
    assert _text(_create(stub, _params(random_stack, temperature=1.0, top_k=1))) == greedy


def test_raw_prompt_is_not_templated(
    random_stack: Stack, stub: gen_grpc.GenerationServiceStub
) -> None:
    raw = pb.CreateResponseParams(
        model=random_stack.settings.models[0].name, prompt="The sea", max_output_tokens=4
    )
    response = _create(stub, raw)
    templated = stub.CountInputTokens(
        gen.CountInputTokensRequest(params=_params(random_stack))
    ).input_tokens
    assert 0 < response.usage.input_tokens < templated
    assert response.usage.output_tokens == 4
    with pytest.raises(grpc.RpcError) as refused:
        _create(stub, pb.CreateResponseParams(model=raw.model, prompt="x", stop=[""]))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
