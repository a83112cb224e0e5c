"""JSON <-> proto at the façade edge: round trips and every decoding refusal with its param."""

from __future__ import annotations

from typing import Any

import pytest
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.responses.from_proto import item_to_json, response_to_json
from mlx_responses.http_facade.responses.to_proto import item_from_json, params_from_json

from mlx_responses.v1 import responses_pb2 as pb


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hi", **fields}


def test_string_input_is_one_user_message() -> None:
    params = params_from_json(_body())
    assert len(params.input) == 1
    assert params.input[0].message.role == pb.ROLE_USER
    assert params.input[0].message.content[0].input_text.text == "hi"


def test_output_items_replay_as_input() -> None:
    items = [
        pb.Item(
            message=pb.MessageItem(
                id="msg_1",
                role=pb.ROLE_ASSISTANT,
                status=pb.ITEM_STATUS_COMPLETED,
                content=[
                    pb.ContentPart(output_text=pb.OutputText(text="a")),
                    pb.ContentPart(refusal=pb.Refusal(refusal="no")),
                ],
            )
        ),
        pb.Item(
            function_call=pb.FunctionCallItem(
                id="fc_1",
                call_id="call_1",
                name="f",
                arguments='{"x": 1}',
                status=pb.ITEM_STATUS_COMPLETED,
            )
        ),
        pb.Item(
            function_call_output=pb.FunctionCallOutputItem(
                id="fco_1", call_id="call_1", output="3", status=pb.ITEM_STATUS_COMPLETED
            )
        ),
        pb.Item(
            reasoning=pb.ReasoningItem(
                id="rs_1", content=[pb.ReasoningText(text="t")], status=pb.ITEM_STATUS_COMPLETED
            )
        ),
        pb.Item(compaction=pb.CompactionItem(id="cmp_1", encrypted_content="abc")),
    ]
    for item in items:
        assert item_from_json(item_to_json(item), "input[0]") == item


def test_role_without_type_is_a_message() -> None:
    item = item_from_json({"role": "developer", "content": "be brief"}, "input[0]")
    assert item.message.role == pb.ROLE_DEVELOPER


def test_ignored_fields_are_accepted() -> None:
    params = params_from_json(
        _body(
            user="u",
            safety_identifier="s",
            prompt_cache_key="k",
            client_metadata={"a": "b"},
            service_tier="auto",
            include=["reasoning.encrypted_content"],
            reasoning={"summary": "auto"},
            store=False,
        )
    )
    assert params.store is False and params.prompt_cache_key == "k"


REFUSALS = [
    ([], None),
    (_body(model=3), "model"),
    ({"input": "x"}, "model"),
    ({"model": "m"}, "input"),
    (_body(input=5), "input"),
    (_body(input=[{"type": "banana"}]), "input[0].type"),
    (_body(input=[{"role": "wizard", "content": "x"}]), "input[0].role"),
    (_body(input=[{"role": "user"}]), "input[0].content"),
    (
        _body(input=[{"role": "user", "content": [{"type": "input_image"}]}]),
        "input[0].content[0].image_url",
    ),
    (_body(input=[{"type": "function_call", "name": "f"}]), "input[0].call_id"),
    (_body(temperature="hot"), "temperature"),
    (_body(temperature=True), "temperature"),
    (_body(max_output_tokens=1.5), "max_output_tokens"),
    (_body(tools=[{"type": "telepathy"}]), "tools[0].type"),
    (_body(tools=[{"type": "namespace", "name": "ns"}]), "tools[0].tools"),
    (
        _body(tools=[{"type": "namespace", "name": "a", "tools": [{"type": "namespace"}]}]),
        "tools[0].tools[0].type",
    ),
    (_body(presence_penalty="lots"), "presence_penalty"),
    (_body(tools=[{"type": "function"}]), "tools[0].name"),
    (_body(tool_choice="sometimes"), "tool_choice"),
    (_body(tool_choice={"type": "file_search"}), "tool_choice"),
    (_body(text={"format": {"type": "yaml"}}), "text.format.type"),
    (
        _body(text={"format": {"type": "json_schema", "name": "x", "schema": 3}}),
        "text.format.schema",
    ),
    (_body(metadata={"a": 1}), "metadata.a"),
    (_body(store="yes"), "store"),
    (_body(stream=1), "stream"),
]


@pytest.mark.parametrize(("body", "param"), REFUSALS)
def test_refusals_name_the_param(body: Any, param: str | None) -> None:
    with pytest.raises(OpenAIError) as caught:
        params_from_json(body)
    assert caught.value.status == 400
    assert caught.value.body()["error"]["type"] == "invalid_request_error"
    assert caught.value.param == param


HOSTED = [
    "web_search",
    "file_search",
    "computer_use_preview",
    "code_interpreter",
    "image_generation",
    "mcp",
    "function_shell",
]


@pytest.mark.parametrize("kind", HOSTED)
def test_every_hosted_tool_of_the_seed_reaches_the_core_as_hosted(kind: str) -> None:
    # The core refuses (seed) or drops (--hosted-tools drop) them: tests/unit/test_tool_policy.py
    params = params_from_json(_body(tools=[{"type": kind}]))
    assert params.tools[0].hosted.type == kind


def test_namespace_tool_decodes_with_its_functions() -> None:
    fn = {"type": "function", "name": "spawn", "parameters": {"type": "object"}}
    tool = {"type": "namespace", "name": "agents", "description": "d", "tools": [fn]}
    params = params_from_json(_body(tools=[tool]))
    ns = params.tools[0].namespace
    assert (ns.name, ns.description, ns.tools[0].function.name) == ("agents", "d", "spawn")


def test_namespaced_function_call_round_trips() -> None:
    item = {"type": "function_call", "call_id": "c", "name": "spawn", "arguments": "{}"}
    decoded = item_from_json({**item, "namespace": "agents"}, "input[0]")
    assert decoded.function_call.namespace == "agents"
    assert item_to_json(decoded)["namespace"] == "agents"
    assert "namespace" not in item_to_json(item_from_json(item, "input[0]"))


def test_penalties_decode_and_echo() -> None:
    params = params_from_json(_body(presence_penalty=1, frequency_penalty=-0.5))
    assert (params.presence_penalty, params.frequency_penalty) == (1.0, -0.5)
    assert not params_from_json(_body()).HasField("presence_penalty")
    out = response_to_json(pb.Response(id="r", presence_penalty=0.5))
    assert (out["presence_penalty"], out["frequency_penalty"]) == (0.5, 0.0)


def test_foreground_response_has_no_background_key() -> None:
    assert "background" not in response_to_json(pb.Response(id="r"))
    assert response_to_json(pb.Response(id="r", background=True))["background"] is True


def test_response_json_has_every_resource_field() -> None:
    fields = set(response_to_json(pb.Response(id="r")))
    expected = {
        "id", "object", "created_at", "status", "completed_at", "error", "incomplete_details",
        "instructions", "max_output_tokens", "model", "output", "parallel_tool_calls",
        "previous_response_id", "reasoning", "service_tier", "store", "temperature", "text",
        "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "usage", "user",
        "metadata", "safety_identifier", "prompt_cache_key", "conversation", "max_tool_calls",
    }  # fmt: skip
    assert expected <= fields
