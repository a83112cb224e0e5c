"""JSON inside strings is decoded with bounds: depth, number length and lone surrogates are 400s."""

from __future__ import annotations

import base64
from typing import Any

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from mlx_responses.v1 import generation_service_pb2 as gen
from mlx_responses.v1 import generation_service_pb2_grpc as gen_grpc
from mlx_responses.v1 import responses_pb2 as pb
from tests.support.stack import Stack

HOSTILE_JSON = {
    "deep": "[" * 5000,
    "deep_closed": "[" * 5000 + "]" * 5000,
    "long_integer": "1" * 5000,
    "lone_surrogate": '"\\ud800"',
    "surrogate_key": '{"\\udfff": 1}',
}


def _call_items(arguments: str) -> list[dict[str, Any]]:
    return [
        {"type": "message", "role": "user", "content": "Call f."},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": arguments},
        {"type": "function_call_output", "call_id": "call_1", "output": "done"},
    ]


def _compaction(payload: str) -> list[dict[str, Any]]:
    content = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
    return [
        {"type": "compaction", "encrypted_content": content},
        {"type": "message", "role": "user", "content": "Go on."},
    ]


def _post(stack: Stack, path: str, input_items: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, "input": input_items, "max_output_tokens": 4}
    return httpx.post(f"{stack.base_url}{path}", json=body, timeout=60)


PATHS = ["/v1/responses", "/v1/responses/input_tokens", "/v1/responses/compact"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", ["deep", "deep_closed", "long_integer", "lone_surrogate"])
def test_function_call_arguments_stay_4xx(stack: Stack, path: str, name: str) -> None:
    reply = _post(stack, path, _call_items(HOSTILE_JSON[name]))
    assert reply.status_code < 500, reply.text[:300]
    if name != "deep":  # unclosed JSON is no JSON: kept as text, like any malformed arguments
        assert reply.status_code == 400, reply.text[:300]
        assert reply.json()["error"]["param"] == "input[1].arguments"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "payload",
    [
        '{"summary": "s", "items": ' + "[" * 5000 + "]" * 5000 + "}",
        '{"summary": "\\ud800", "items": []}',
        '{"summary": "s", "items": [], "n": ' + "9" * 5000 + "}",
    ],
    ids=["deep", "surrogate", "long_integer"],
)
def test_compaction_content_stays_4xx(stack: Stack, path: str, payload: str) -> None:
    reply = _post(stack, path, _compaction(payload))
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"]["code"] == "invalid_compaction"


def _grpc_params(stack: Stack, **fields: Any) -> pb.CreateResponseParams:
    text = pb.ContentPart(input_text=pb.InputText(text="hi"))
    return pb.CreateResponseParams(
        model=stack.settings.models[0].name,
        input=[pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[text]))],
        max_output_tokens=4,
        **fields,
    )


@pytest.mark.parametrize("name", sorted(HOSTILE_JSON))
def test_json_text_fields_over_grpc_are_invalid_argument(stack: Stack, name: str) -> None:
    hostile = HOSTILE_JSON[name]
    wrapped = '{"a": ' + hostile + "}" if name not in ("surrogate_key",) else hostile
    cases = {
        "chat_template_kwargs": _grpc_params(stack, chat_template_kwargs_json=wrapped),
        "text.format.schema": _grpc_params(
            stack,
            text=pb.TextConfig(json_schema=pb.TextFormatJsonSchema(name="x", schema_json=wrapped)),
        ),
        "tools[0].parameters": _grpc_params(
            stack,
            tools=[pb.Tool(function=pb.FunctionTool(name="f", parameters_json=wrapped))],
        ),
    }
    with grpc.insecure_channel(stack.grpc_address) as channel:
        stub = gen_grpc.GenerationServiceStub(channel)
        for param, params in cases.items():
            with pytest.raises(grpc.RpcError) as refused:
                stub.CountInputTokens(gen.CountInputTokensRequest(params=params), timeout=30)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (param, refused.value)
            status = rpc_status.from_call(refused.value)
            assert status is not None
            info = error_details_pb2.ErrorInfo()
            status.details[0].Unpack(info)
            assert info.metadata["param"] == param
