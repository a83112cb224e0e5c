"""Grammar-enforced tool_choice on the bundled model, through the OpenAI SDK, streamed and not."""

from __future__ import annotations

import enum
import json
from typing import Any

import openai
import pydantic
import pytest

from tests.support.stack import Stack
from tests.support.tools import WEATHER_STRICT

TIME = {
    "type": "function",
    "name": "get_time",
    "description": "Current time in a zone.",
    "parameters": {
        "type": "object",
        "properties": {"zone": {"type": "string"}, "offset": {"type": "integer"}},
        "required": ["zone"],
    },
}
TOOLS: list[Any] = [WEATHER_STRICT, TIME]
# A prompt the bundled model answers with text when the tools are free.
PLAIN = "Reply with: hello"
ASKS_WEATHER = "Use the get_weather tool with city set to paris."


@pytest.fixture(scope="module")
def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def _create(client: openai.OpenAI, stack: Stack, **fields: Any) -> Any:
    return client.responses.create(
        model=stack.settings.models[0].name, tools=TOOLS, max_output_tokens=200, **fields
    )


def _calls(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "function_call"]


def _valid(call: Any) -> dict[str, Any]:
    arguments = json.loads(call.arguments)
    assert isinstance(arguments, dict)
    schema = {"get_weather": WEATHER_STRICT, "get_time": TIME}[call.name]["parameters"]
    assert set(schema["required"]) <= set(arguments) <= set(schema["properties"])
    for key, value in arguments.items():
        kind = schema["properties"][key]["type"]
        assert isinstance(value, {"string": str, "integer": int}[kind])
    return arguments


def test_free_choice_answers_the_plain_prompt_with_text(
    client: openai.OpenAI, stack: Stack
) -> None:
    """The baseline the forced tests depend on: without a forced choice this is text."""
    reply = _create(client, stack, input=PLAIN)
    assert not _calls(reply) and reply.output_text == "hello"


def test_named_function_is_called(client: openai.OpenAI, stack: Stack) -> None:
    reply = _create(
        client, stack, input=PLAIN, tool_choice={"type": "function", "name": "get_time"}
    )
    assert reply.status == "completed"
    (call,) = _calls(reply)
    assert call.name == "get_time" and call.status == "completed"
    _valid(call)
    assert reply.tool_choice.name == "get_time"  # type: ignore[union-attr]


def test_required_is_a_call_of_a_listed_tool(client: openai.OpenAI, stack: Stack) -> None:
    reply = _create(client, stack, input=PLAIN, tool_choice="required", parallel_tool_calls=False)
    assert reply.status == "completed"
    (call,) = _calls(reply)
    assert call.name in ("get_weather", "get_time")
    _valid(call)
    # A thinking model may reason first; nothing else comes beside the call.
    assert all(item.type in ("reasoning", "function_call") for item in reply.output)


def test_allowed_tools_required_limits_the_call(client: openai.OpenAI, stack: Stack) -> None:
    choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "get_time"}],
    }
    reply = _create(client, stack, input=ASKS_WEATHER, tool_choice=choice)
    calls = _calls(reply)
    assert calls and all(c.name == "get_time" for c in calls)
    for call in calls:
        _valid(call)
    echoed = reply.tool_choice
    assert echoed.type == "allowed_tools" and echoed.mode == "required"  # type: ignore[union-attr]
    assert [t["name"] for t in echoed.tools] == ["get_time"]  # type: ignore[union-attr]


def test_allowed_tools_auto_never_calls_another_tool(client: openai.OpenAI, stack: Stack) -> None:
    choice = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": "get_time"}],
    }
    reply = _create(client, stack, input=ASKS_WEATHER, tool_choice=choice)
    assert reply.status == "completed"
    assert all(c.name == "get_time" for c in _calls(reply))
    plain = _create(client, stack, input=PLAIN, tool_choice=choice)
    assert plain.output_text == "hello", "auto still lets the model answer"


# Requests off the bundled model's training phrasings: left free, it opened a call here and
# wrote an undeclared name (`weather`) and arguments that are not JSON.
OFF_PHRASINGS = [
    "What is the weather in Paris? Use get_weather.",
    "Use get_weather for Paris.",
    "Call get_time now, zone utc.",
    "weather tool please: rome",
]


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "stream"])
def test_auto_holds_an_opened_call_to_a_declared_function(
    client: openai.OpenAI, stack: Stack, stream: bool
) -> None:
    calls = []
    for prompt in OFF_PHRASINGS:
        if stream:
            with client.responses.stream(
                model=stack.settings.models[0].name,
                tools=TOOLS,
                max_output_tokens=200,
                input=prompt,
                temperature=0,
            ) as events:
                reply = events.get_final_response()
        else:
            reply = _create(client, stack, input=prompt, temperature=0)
        assert reply.status == "completed", prompt
        assert not reply.tool_choice or reply.tool_choice == "auto"
        for call in _calls(reply):
            assert call.name in ("get_weather", "get_time"), (prompt, call)
            _valid(call)
            calls.append(call)
    assert calls, "the prompts ask for tools; some must be called"


@pytest.mark.parametrize(
    "choice",
    ["required", {"type": "function", "name": "get_weather"}],
    ids=["required", "function"],
)
def test_forced_call_streams_item_and_argument_events(
    client: openai.OpenAI, stack: Stack, choice: Any
) -> None:
    events = list(
        _create(
            client, stack, input=PLAIN, tool_choice=choice, parallel_tool_calls=False, stream=True
        )
    )
    kinds = [e.type for e in events]
    assert "response.output_text.delta" not in kinds
    # A thinking model may stream a reasoning item first; the call is the next item.
    added = next(
        e for e in events if e.type == "response.output_item.added" and e.item.type != "reasoning"
    )
    assert added.item.type == "function_call"
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert deltas and "".join(d.delta for d in deltas) == done.arguments
    first_delta = kinds.index("response.function_call_arguments.delta")
    assert events.index(added) < first_delta
    assert first_delta < kinds.index("response.function_call_arguments.done")
    call_done = next(
        i
        for i, e in enumerate(events)
        if e.type == "response.output_item.done" and e.item.type == "function_call"
    )
    assert kinds.index("response.function_call_arguments.done") < call_done
    final = events[-1].response
    (call,) = _calls(final)
    assert call.arguments == done.arguments and call.id == added.item.id
    _valid(call)


def test_allowed_tools_must_name_listed_tools(client: openai.OpenAI, stack: Stack) -> None:
    choice = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": "nope"}],
    }
    with pytest.raises(openai.BadRequestError) as caught:
        _create(client, stack, input=PLAIN, tool_choice=choice)
    assert caught.value.body["param"] == "tool_choice.tools[0].name"  # type: ignore[index]


# Keywords llguidance does not implement, as real clients send them (Claude Code's own tools
# carry `propertyNames`; MCP servers `format: uri-reference`).
UNENFORCEABLE = {
    "type": "object",
    "properties": {
        "zone": {"type": "string", "format": "uri-reference"},
        "offset": {"type": "integer"},
        "labels": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
    },
    "required": ["zone", "offset"],
    "additionalProperties": False,
}


def test_keywords_the_grammar_cannot_enforce_are_left_out(
    client: openai.OpenAI, stack: Stack
) -> None:
    """A non-strict schema is enforced in what can be: a forced call still has its required,
    typed arguments, and nothing outside `properties`."""
    tool = {**TIME, "parameters": UNENFORCEABLE, "strict": False}
    reply = client.responses.create(
        model=stack.settings.models[0].name,
        input=PLAIN,
        tools=[tool],
        tool_choice={"type": "function", "name": "get_time"},
        max_output_tokens=200,
    )
    (call,) = _calls(reply)
    arguments = json.loads(call.arguments)
    assert {"zone", "offset"} <= set(arguments) <= {"zone", "offset", "labels"}, arguments
    assert isinstance(arguments["zone"], str) and isinstance(arguments["offset"], int)
    # Left unset, `strict` is not a promise to keep either (Anthropic's and chat's tools).
    unset = {k: v for k, v in tool.items() if k != "strict"}
    reply = client.responses.create(
        model=stack.settings.models[0].name, input=PLAIN, tools=[unset], max_output_tokens=20
    )
    assert reply.status == "completed"


def test_a_strict_schema_the_grammar_cannot_enforce_is_400(
    client: openai.OpenAI, stack: Stack
) -> None:
    """`strict: true` promises the whole schema: what cannot be enforced is named (OpenAI
    refuses keywords its strict mode does not support the same way)."""
    tools = [TIME, {**TIME, "name": "get_zone", "parameters": UNENFORCEABLE, "strict": True}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model=stack.settings.models[0].name,
            input=PLAIN,
            tools=tools,  # type: ignore[arg-type]
        )
    error = caught.value.body
    assert error["param"] == "tools[1].parameters", error  # type: ignore[index]
    assert error["code"] == "invalid_function_parameters", error  # type: ignore[index]
    assert "get_zone" in error["message"] and "uri-reference" in error["message"], error  # type: ignore[index]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Box(pydantic.BaseModel):
    width: int
    color: Color


class Paint(pydantic.BaseModel):
    """Paint a box."""

    box: Box
    coats: list[Color]


def test_a_pydantic_tool_with_references_is_called(client: openai.OpenAI, stack: Stack) -> None:
    """The OpenAI SDK's pydantic_function_tool writes `$defs` and `#/$defs/...` references
    (strict): the call's arguments validate against the model."""
    tool = openai.pydantic_function_tool(Paint)["function"]
    assert "$defs" in json.dumps(tool["parameters"])
    reply = client.responses.create(
        model=stack.settings.models[0].name,
        input=PLAIN,
        tools=[{"type": "function", **tool}],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": "Paint"},
        max_output_tokens=200,
    )
    (call,) = _calls(reply)
    Paint.model_validate_json(call.arguments)
