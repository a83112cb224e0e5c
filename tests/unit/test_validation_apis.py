"""Core-side checks of the fields the other APIs need: stop, top_k and a raw prompt."""

from __future__ import annotations

import pytest
from mlx_responses.service.errors import ServiceError
from mlx_responses.service.limits import MAX_STOP_SEQUENCES
from mlx_responses.service.responses.validation import validate_params

from mlx_responses.v1 import responses_pb2 as pb

USER = pb.Item(
    message=pb.MessageItem(
        role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text="x"))]
    )
)


def _check(params: pb.CreateResponseParams) -> None:
    validate_params(params, lambda name: name == "m")


def _param_of(params: pb.CreateResponseParams) -> str | None:
    with pytest.raises(ServiceError) as refused:
        _check(params)
    return refused.value.param


def test_good_values_pass() -> None:
    _check(pb.CreateResponseParams(model="m", input=[USER], stop=["a", "b"], top_k=0, seed=-1))
    _check(pb.CreateResponseParams(model="m", prompt="Once upon"))


@pytest.mark.parametrize(
    ("params", "param"),
    [
        (pb.CreateResponseParams(model="m", input=[USER], stop=[""]), "stop"),
        (
            pb.CreateResponseParams(model="m", input=[USER], stop=["x"] * (MAX_STOP_SEQUENCES + 1)),
            "stop",
        ),
        (pb.CreateResponseParams(model="m", input=[USER], top_k=-1), "top_k"),
        (pb.CreateResponseParams(model="m", prompt=""), "prompt"),
        (pb.CreateResponseParams(model="m", prompt="x", input=[USER]), "prompt"),
        (
            pb.CreateResponseParams(model="m", prompt="x", previous_response_id="resp_1"),
            "previous_response_id",
        ),
        (pb.CreateResponseParams(model="m", prompt="x", instructions="i"), "instructions"),
    ],
)
def test_refusals_name_the_field(params: pb.CreateResponseParams, param: str) -> None:
    assert _param_of(params) == param
