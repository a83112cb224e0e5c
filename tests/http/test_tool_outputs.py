"""A tool output must answer a call in the input or the history it continues (issue 53).

OpenAI answers 400 ("No tool call found for function call output with call_id ...") for an
output whose call is nowhere: on Responses (the input, a previous_response_id chain, a
conversation), Chat Completions (`tool` messages) and Anthropic Messages (`tool_result`).
Every refusal comes before generation; the accepted requests generate one token.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.stack import Stack


@pytest.fixture(scope="module")
def model(stack: Stack) -> str:
    return stack.settings.models[0].name


def _post(stack: Stack, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{stack.base_url}{path}", json=body, timeout=60)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _call(call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": '{"city": "paris"}',
    }


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "sunny"}


def _refused(reply: httpx.Response, call_id: str, param: str) -> dict[str, Any]:
    assert reply.status_code == 400, reply.text
    error = dict(reply.json()["error"])
    assert error["type"] == "invalid_request_error"
    assert error.get("param") == param
    assert f"'{call_id}'" in error["message"]
    return error


def _respond(stack: Stack, model: str, **body: Any) -> httpx.Response:
    return _post(stack, "/v1/responses", {"model": model, "max_output_tokens": 1, **body})


def test_responses_output_without_its_call_is_refused(stack: Stack, model: str) -> None:
    reply = _respond(stack, model, input=[_user("weather?"), _output("call_nowhere")])
    error = _refused(reply, "call_nowhere", "input[1]")
    assert "function call output" in error["message"]
    custom = {"type": "custom_tool_call_output", "call_id": "call_x", "output": "done"}
    _refused(_respond(stack, model, input=[_user("go"), custom]), "call_x", "input[1]")
    # An output before its call answers nothing yet.
    early = [_user("weather?"), _output("call_a"), _call("call_a")]
    _refused(_respond(stack, model, input=early), "call_a", "input[1]")
    answered = [_user("weather?"), _call("call_a"), _output("call_a")]
    assert _respond(stack, model, input=answered).status_code == 200


def test_responses_output_answers_a_call_of_the_chain(stack: Stack, model: str) -> None:
    first = _respond(stack, model, input=[_user("weather?"), _call("call_chain")])
    assert first.status_code == 200, first.text
    previous = first.json()["id"]
    answered = _respond(stack, model, previous_response_id=previous, input=[_output("call_chain")])
    assert answered.status_code == 200, answered.text
    # The chain goes on: the call is still in its history two turns later.
    again = _respond(
        stack, model, previous_response_id=answered.json()["id"], input=[_output("call_chain")]
    )
    assert again.status_code == 200, again.text
    orphan = _respond(
        stack, model, previous_response_id=previous, input=[_user("and?"), _output("call_other")]
    )
    _refused(orphan, "call_other", "input[1]")


def test_responses_output_answers_a_call_of_the_conversation(stack: Stack, model: str) -> None:
    created = _post(stack, "/v1/conversations", {"items": [_user("weather?"), _call("call_conv")]})
    assert created.status_code == 200, created.text
    conversation = created.json()["id"]
    answered = _respond(stack, model, conversation=conversation, input=[_output("call_conv")])
    assert answered.status_code == 200, answered.text
    orphan = _respond(stack, model, conversation=conversation, input=[_output("call_none")])
    _refused(orphan, "call_none", "input[0]")


def test_input_tokens_refuses_an_orphan_output_too(stack: Stack, model: str) -> None:
    body = {"model": model, "input": [_user("weather?"), _output("call_lost")]}
    _refused(_post(stack, "/v1/responses/input_tokens", body), "call_lost", "input[1]")


def _tool_calls(call_id: str) -> dict[str, Any]:
    function = {"name": "get_weather", "arguments": '{"city": "paris"}'}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


@pytest.mark.parametrize("stream", [False, True])
def test_chat_tool_message_without_its_call_is_refused(
    stack: Stack, model: str, stream: bool
) -> None:
    tool = {"role": "tool", "tool_call_id": "call_gone", "content": "sunny"}
    body = {"model": model, "max_tokens": 1, "stream": stream}
    reply = _post(stack, "/v1/chat/completions", {**body, "messages": [_user("weather?"), tool]})
    error = _refused(reply, "call_gone", "messages[1].tool_call_id")
    assert "tool message" in error["message"] and "tool_call_id" in error["message"]
    answered = [_user("weather?"), _tool_calls("call_gone"), tool]
    reply = _post(stack, "/v1/chat/completions", {**body, "messages": answered})
    assert reply.status_code == 200, reply.text


def test_anthropic_tool_result_without_its_tool_use_is_refused(stack: Stack, model: str) -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "sunny"}
    use = {"type": "tool_use", "id": "toolu_gone", "name": "get_weather", "input": {}}
    body: dict[str, Any] = {"model": model, "max_tokens": 1}
    messages = [_user("weather?"), {"role": "user", "content": [result]}]
    reply = _post(stack, "/v1/messages", {**body, "messages": messages})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("messages[1].content[0].tool_use_id: ")
    assert "'toolu_gone'" in error["message"] and "tool_result block" in error["message"]
    counted = _post(stack, "/v1/messages/count_tokens", {"model": model, "messages": messages})
    assert counted.status_code == 400, counted.text
    answered = [
        _user("weather?"),
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    reply = _post(stack, "/v1/messages", {**body, "messages": answered})
    assert reply.status_code == 200, reply.text
