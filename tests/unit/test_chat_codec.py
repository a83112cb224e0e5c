"""Chat Completions codec: JSON -> CreateResponseParams, and core events -> chunks (no model)."""

from __future__ import annotations

import json

import pytest
from mlx_responses.http_facade.chat.stream import ChoiceChunker
from mlx_responses.http_facade.chat.to_proto import chat_from_json
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.kit.relay import choice_params

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb


def test_messages_become_the_same_items_responses_takes() -> None:
    chat = chat_from_json(
        {
            "model": "m",
            "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "be brief"}]},
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "look it up",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"x"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            ],
            "stop": "END",
            "seed": 7,
            "max_tokens": 5,
            "reasoning_effort": "low",
            "chat_template_kwargs": {"enable_thinking": False},
            "logprobs": True,
            "top_logprobs": 3,
            "n": 2,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    p = chat.params
    kinds = [i.WhichOneof("item") for i in p.input]
    assert kinds == ["message", "message", "reasoning", "function_call", "function_call_output"]
    assert p.input[0].message.role == pb.ROLE_DEVELOPER
    assert p.input[3].function_call.call_id == "call_1"
    assert p.input[4].function_call_output.output == "sunny"
    assert list(p.stop) == ["END"] and p.seed == 7 and p.max_output_tokens == 5
    assert json.loads(p.chat_template_kwargs_json) == {
        "enable_thinking": False,
        "reasoning_effort": "low",
    }
    assert p.top_logprobs == 3 and "message.output_text.logprobs" in p.include
    assert not p.store and p.stream
    assert (chat.n, chat.logprobs, chat.include_usage) == (2, True, True)
    seeds = [c.seed for c in choice_params(p, 3)]
    assert seeds == [7, 8, 9]


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    chat = chat_from_json({**body, "max_tokens": 9, "max_completion_tokens": 4})
    assert chat.params.max_output_tokens == 4


def _event(kind: int, **payload: object) -> ev.ResponseEvent:
    return ev.ResponseEvent(type=kind, **payload)  # type: ignore[arg-type]


def test_chunker_renders_text_tools_and_finish() -> None:
    chunker = ChoiceChunker("chatcmpl-1", 5, "m", index=1)
    created = _event(
        ev.EVENT_TYPE_RESPONSE_CREATED,
        snapshot=ev.ResponseSnapshotEvent(response=pb.Response(id="resp_1")),
    )
    (role,) = chunker.feed(created)
    assert role["choices"][0] == {
        "index": 1,
        "delta": {"role": "assistant", "content": ""},
        "finish_reason": None,
    }
    (text,) = chunker.feed(
        _event(ev.EVENT_TYPE_OUTPUT_TEXT_DELTA, text_delta=ev.TextDeltaEvent(delta="hi"))
    )
    assert text["choices"][0]["delta"] == {"content": "hi"}
    call = pb.Item(function_call=pb.FunctionCallItem(id="fc_1", call_id="call_1", name="f"))
    (added,) = chunker.feed(
        _event(ev.EVENT_TYPE_OUTPUT_ITEM_ADDED, output_item=ev.OutputItemEvent(item=call))
    )
    assert added["choices"][0]["delta"]["tool_calls"][0]["id"] == "call_1"
    (args,) = chunker.feed(
        _event(
            ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA,
            text_delta=ev.TextDeltaEvent(item_id="fc_1", delta="{}"),
        )
    )
    assert args["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "function": {"arguments": "{}"}}
    ]
    final = pb.Response(status=pb.RESPONSE_STATUS_COMPLETED, output=[call])
    (done,) = chunker.feed(
        _event(ev.EVENT_TYPE_RESPONSE_COMPLETED, snapshot=ev.ResponseSnapshotEvent(response=final))
    )
    assert done["choices"][0]["finish_reason"] == "tool_calls"
    assert chunker.final == final


def test_chunker_fails_loudly_on_a_failed_turn() -> None:
    chunker = ChoiceChunker("chatcmpl-1", 5, "m")
    failed = pb.Response(
        status=pb.RESPONSE_STATUS_FAILED, error=pb.ResponseError(code="server_error", message="x")
    )
    with pytest.raises(OpenAIError):
        chunker.feed(
            _event(
                ev.EVENT_TYPE_RESPONSE_FAILED, snapshot=ev.ResponseSnapshotEvent(response=failed)
            )
        )
