"""Anthropic Messages codec: JSON -> params, events -> SSE events, and its error table."""

from __future__ import annotations

import json

import pytest
from mlx_responses.http_facade.anthropic.stream import MessageEvents
from mlx_responses.http_facade.anthropic.to_proto import messages_from_json
from mlx_responses.http_facade.kit.errors import (
    ANTHROPIC_ERROR_TYPES,
    FALLBACK,
    GRPC_TABLE,
    REASON_TABLE,
    OpenAIError,
    anthropic_error_body,
    anthropic_error_type,
    speaks_anthropic,
)

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb


def test_blocks_become_responses_items_in_order() -> None:
    params = messages_from_json(
        {
            "model": "m",
            "max_tokens": 9,
            "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "messages": [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "look", "signature": "s"},
                        {"type": "text", "text": "Let me "},
                        {"type": "text", "text": "check."},
                        {"type": "tool_use", "id": "t1", "name": "w", "input": {"c": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "bad"}],
                            "is_error": True,
                        },
                        {"type": "text", "text": "and?"},
                    ],
                },
            ],
            "stop_sequences": ["X"],
            "top_k": 5,
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            "tools": [{"name": "w", "input_schema": {"type": "object"}}, {"type": "web_search"}],
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "metadata": {"user_id": "u1"},
        }
    )
    kinds = [i.WhichOneof("item") for i in params.input]
    assert kinds == [
        "message",
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert params.input[0].message.role == pb.ROLE_SYSTEM
    assert params.input[0].message.content[0].input_text.text == "a\n\nb"
    assert params.input[3].message.content[0].output_text.text == "Let me check."
    assert json.loads(params.input[4].function_call.arguments) == {"c": 1}
    assert params.input[5].function_call_output.output == "Error: bad"
    assert list(params.stop) == ["X"] and params.top_k == 5 and params.max_output_tokens == 9
    assert params.tool_choice.mode == pb.TOOL_CHOICE_MODE_REQUIRED
    assert not params.parallel_tool_calls
    assert [t.WhichOneof("tool") for t in params.tools] == ["function", "hosted"]
    assert json.loads(params.chat_template_kwargs_json) == {"enable_thinking": True}
    assert params.user == "u1" and not params.store


def test_a_system_message_inside_messages_renders_in_place() -> None:
    """Claude Code 2.1 sends one after the user turn."""
    params = messages_from_json(
        {
            "model": "m",
            "max_tokens": 4,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "system", "content": [{"type": "text", "text": "agents: none"}]},
            ],
        }
    )
    roles = [i.message.role for i in params.input]
    assert roles == [pb.ROLE_USER, pb.ROLE_SYSTEM]
    with pytest.raises(OpenAIError):
        messages_from_json(
            {
                "model": "m",
                "max_tokens": 4,
                "messages": [
                    {"role": "system", "content": [{"type": "tool_use", "id": "t", "name": "w"}]}
                ],
            }
        )


def test_count_tokens_needs_no_max_tokens() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert messages_from_json(body, count_only=True).input
    with pytest.raises(OpenAIError):
        messages_from_json(body)


def _snapshot(kind: int, response: pb.Response) -> ev.ResponseEvent:
    return ev.ResponseEvent(type=kind, snapshot=ev.ResponseSnapshotEvent(response=response))  # type: ignore[arg-type]


def test_events_render_blocks_and_the_final_delta() -> None:
    renderer = MessageEvents()
    created = renderer.feed(_snapshot(ev.EVENT_TYPE_RESPONSE_CREATED, pb.Response(id="resp_1")))
    assert [e["type"] for e in created] == ["message_start", "ping"]
    assert created[0]["message"]["id"] == "msg_1"
    call = pb.Item(function_call=pb.FunctionCallItem(id="fc_1", call_id="call_1", name="w"))
    text = pb.Item(message=pb.MessageItem(id="msg_a"))
    out = renderer.feed(
        ev.ResponseEvent(
            type=ev.EVENT_TYPE_OUTPUT_ITEM_ADDED, output_item=ev.OutputItemEvent(item=text)
        )
    )
    assert out == [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    ]
    out = renderer.feed(
        ev.ResponseEvent(
            type=ev.EVENT_TYPE_OUTPUT_TEXT_DELTA,
            text_delta=ev.TextDeltaEvent(item_id="msg_a", delta="hi"),
        )
    )
    assert out[0]["delta"] == {"type": "text_delta", "text": "hi"}
    renderer.feed(
        ev.ResponseEvent(
            type=ev.EVENT_TYPE_OUTPUT_ITEM_DONE, output_item=ev.OutputItemEvent(item=text)
        )
    )
    (start,) = renderer.feed(
        ev.ResponseEvent(
            type=ev.EVENT_TYPE_OUTPUT_ITEM_ADDED, output_item=ev.OutputItemEvent(item=call)
        )
    )
    assert start["index"] == 1 and start["content_block"]["type"] == "tool_use"
    (args,) = renderer.feed(
        ev.ResponseEvent(
            type=ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA,
            text_delta=ev.TextDeltaEvent(item_id="fc_1", delta='{"a"'),
        )
    )
    assert args["delta"] == {"type": "input_json_delta", "partial_json": '{"a"'}
    final = pb.Response(
        status=pb.RESPONSE_STATUS_COMPLETED,
        output=[text, call],
        # The cache wrote 5 tokens past those read, 2 of them up to the client's breakpoint:
        # Anthropic counts those 2 as written, the other 3 as input.
        usage=pb.Usage(
            input_tokens=10,
            cached_tokens=4,
            cache_write_tokens=5,
            breakpoint_write_tokens=2,
            output_tokens=3,
        ),
    )
    delta, stop = renderer.feed(_snapshot(ev.EVENT_TYPE_RESPONSE_COMPLETED, final))
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"] == {
        "input_tokens": 4,
        "cache_creation_input_tokens": 2,
        "cache_read_input_tokens": 4,
        "output_tokens": 3,
    }
    assert stop == {"type": "message_stop"}


@pytest.mark.parametrize("status", sorted(ANTHROPIC_ERROR_TYPES))
def test_every_anthropic_row(status: int) -> None:
    assert anthropic_error_type(status) == ANTHROPIC_ERROR_TYPES[status]


def test_every_facade_status_has_an_anthropic_type() -> None:
    kinds = [*REASON_TABLE.values(), *GRPC_TABLE.values(), FALLBACK]
    for kind in kinds:
        body = anthropic_error_body(OpenAIError(kind, "m"))
        assert body["type"] == "error" and body["error"]["message"] == "m"
        expected = "invalid_request_error" if kind.status < 500 else "api_error"
        assert body["error"]["type"] == ANTHROPIC_ERROR_TYPES.get(kind.status, expected)


def test_anthropic_paths() -> None:
    assert speaks_anthropic("/v1/messages") and speaks_anthropic("/messages/count_tokens")
    assert not speaks_anthropic("/v1/messagesx") and not speaks_anthropic("/v1/chat/completions")
