"""Core-side value checks: ranges, truncation, tool_choice, context_management, model name."""

from __future__ import annotations

import pytest
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.responses.validation import validate_params

from mlx_responses.v1 import responses_pb2 as pb


def _params(**fields: object) -> pb.CreateResponseParams:
    params = pb.CreateResponseParams(
        model="m",
        input=[
            pb.Item(
                message=pb.MessageItem(
                    role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text="x"))]
                )
            )
        ],
    )
    for key, value in fields.items():
        if isinstance(value, pb.ToolChoice | pb.ContextManagement | pb.Tool):
            getattr(params, key).append(
                value
            ) if key != "tool_choice" else params.tool_choice.CopyFrom(value)
        else:
            setattr(params, key, value)
    return params


def _check(params: pb.CreateResponseParams) -> None:
    validate_params(params, lambda name: name == "m")


CASES = [
    ({"temperature": 2.5}, "temperature"),
    ({"temperature": -0.1}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_p": -1.0}, "top_p"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"top_logprobs": 21}, "top_logprobs"),
    ({"truncation": "auto"}, "truncation"),
    ({"previous_response_id": "resp_x", "conversation": "c"}, "previous_response_id"),
    ({"tool_choice": pb.ToolChoice(function_name="nope")}, "tool_choice"),
    ({"tool_choice": pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_REQUIRED)}, "tool_choice"),
    (
        {"context_management": pb.ContextManagement(type="compaction")},
        "context_management[0].compact_threshold",
    ),
    (
        {"context_management": pb.ContextManagement(type="prune", compact_threshold=5)},
        "context_management[0].type",
    ),
    ({"chat_template_kwargs_json": "[1]"}, "chat_template_kwargs"),
    (
        {"tools": pb.Tool(function=pb.FunctionTool(name="f", parameters_json="{"))},
        "tools[0].parameters",
    ),
]


@pytest.mark.parametrize(("fields", "param"), CASES)
def test_refusals(fields: dict[str, object], param: str) -> None:
    with pytest.raises(ServiceError) as caught:
        _check(_params(**fields))
    assert caught.value.reason is Reason.INVALID_REQUEST
    assert caught.value.param == param


def test_unknown_model_is_model_not_found() -> None:
    with pytest.raises(ServiceError) as caught:
        _check(_params(model="other"))
    assert caught.value.reason is Reason.MODEL_NOT_FOUND
    assert caught.value.code == "model_not_found"


def test_empty_input() -> None:
    params = _params()
    del params.input[:]
    with pytest.raises(ServiceError) as caught:
        _check(params)
    assert caught.value.param == "input"


@pytest.mark.parametrize(
    "fields",
    [{"temperature": 0.0}, {"temperature": 2.0}, {"top_p": 0.0}, {"truncation": "disabled"}],
)
def test_edges_are_accepted(fields: dict[str, object]) -> None:
    _check(_params(**fields))
