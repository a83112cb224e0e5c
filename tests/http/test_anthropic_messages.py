"""POST /v1/messages and count_tokens through the Anthropic SDK, plus raw-HTTP refusals.

NOTE: the Anthropic SDK (2.x) no longer types `temperature`, `top_p` or `top_k`; this server
still takes them, so the tests send them as `extra_body`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from mlx_responses.http_facade.app import start_facade
from mlx_responses.http_facade.config import FacadeSettings

from tests.support.stack import Stack

GREEDY = {"temperature": 0}
TOOL_PROMPT = "Use the get_weather tool with city set to paris."
WEATHER: Any = {
    "name": "get_weather",
    "description": "Current weather of a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture(scope="module")
def client(stack: Stack) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.base_url, api_key="x", max_retries=0)


@pytest.fixture(scope="module")
def model(stack: Stack) -> str:
    return stack.settings.models[0].name


def user(content: Any) -> Any:
    return {"role": "user", "content": content}


def test_create_answers_a_message(client: anthropic.Anthropic, model: str) -> None:
    reply = client.messages.create(
        model=model, max_tokens=32, messages=[user("Reply with: tokyo")], extra_body=GREEDY
    )
    assert reply.type == "message" and reply.role == "assistant" and reply.id.startswith("msg_")
    assert [b.type for b in reply.content] == ["text"]
    assert reply.content[0].text == "tokyo"  # type: ignore[union-attr]
    assert reply.stop_reason == "end_turn" and reply.stop_sequence is None
    assert reply.usage.output_tokens > 0
    counted = client.messages.count_tokens(model=model, messages=[user("Reply with: tokyo")])
    cached = reply.usage.cache_read_input_tokens or 0
    written = reply.usage.cache_creation_input_tokens or 0
    assert reply.usage.input_tokens + cached + written == counted.input_tokens


def test_stream_matches_create(client: anthropic.Anthropic, model: str) -> None:
    body: Any = {"model": model, "max_tokens": 32, "messages": [user("Reply with: the red fox")]}
    whole = client.messages.create(**body, extra_body=GREEDY)
    with client.messages.stream(**body, extra_body=GREEDY) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_message()
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert "message_delta" in types  # (the SDK swallows `ping`; the raw test sees it)
    assert types.count("content_block_start") == types.count("content_block_stop") == 1
    assert [b.model_dump(include={"type", "text"}) for b in final.content] == [
        b.model_dump(include={"type", "text"}) for b in whole.content
    ]
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == whole.usage.output_tokens

    def prompt(usage: Any) -> int:
        cache = (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
        return int(usage.input_tokens or 0) + cache

    assert prompt(final.usage) == prompt(whole.usage)


def test_raw_stream_frames_name_their_event(stack: Stack, model: str) -> None:
    body = {
        "model": model,
        "max_tokens": 16,
        "messages": [user("Reply with: rain")],
        "stream": True,
    }
    with httpx.stream("POST", f"{stack.base_url}/v1/messages", json=body, timeout=60) as reply:
        lines = list(reply.iter_lines())
    names = [line[7:] for line in lines if line.startswith("event: ")]
    datas = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert names == [d["type"] for d in datas]
    assert names[:2] == ["message_start", "ping"]
    deltas = [d["delta"]["text"] for d in datas if d["type"] == "content_block_delta"]
    assert "".join(deltas) == "rain"


def test_tool_use_round_trip(client: anthropic.Anthropic, model: str) -> None:
    messages: list[Any] = [user(TOOL_PROMPT)]
    first = client.messages.create(model=model, max_tokens=64, messages=messages, tools=[WEATHER])
    assert first.stop_reason == "tool_use"
    (call,) = [b for b in first.content if b.type == "tool_use"]
    assert call.name == "get_weather" and call.input == {"city": "paris"}
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        user([{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]),
    ]
    second = client.messages.create(model=model, max_tokens=64, messages=messages, tools=[WEATHER])
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == "sunny"  # type: ignore[union-attr]


def test_tools_with_keywords_the_grammar_cannot_enforce(
    client: anthropic.Anthropic, model: str
) -> None:
    """Claude Code's default tools carry `propertyNames` (its SendMessage, for one), which
    llguidance does not implement: the call is still made, its schema held in the rest."""
    schema = WEATHER["input_schema"]
    tags = {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}
    tool = {
        **WEATHER,
        "input_schema": {**schema, "properties": {**schema["properties"], "tags": tags}},
    }
    reply = client.messages.create(
        model=model, max_tokens=64, messages=[user(TOOL_PROMPT)], tools=[tool]
    )
    (call,) = [b for b in reply.content if b.type == "tool_use"]
    assert call.name == "get_weather" and call.input == {"city": "paris"}


def test_tool_use_streams_input_json(make_stack: Any, model: str) -> None:
    # One delta per decode step: with the default 10 ms window a fast CPU can decode the whole
    # argument (six tokens) inside one window, and it would then arrive as one delta.
    unwindowed = make_stack(stream_window_ms=0)
    client = anthropic.Anthropic(base_url=unwindowed.base_url, api_key="x", max_retries=0)
    with client.messages.stream(
        model=model, max_tokens=64, messages=[user(TOOL_PROMPT)], tools=[WEATHER]
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    partial = [
        e.delta.partial_json  # type: ignore[union-attr]
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"  # type: ignore[union-attr]
    ]
    assert len(partial) > 1, "arguments stream while they are generated"
    assert json.loads("".join(partial)) == {"city": "paris"}
    (call,) = [b for b in final.content if b.type == "tool_use"]
    assert call.input == {"city": "paris"}
    assert final.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("choice", "calls"),
    [
        ({"type": "any"}, True),
        ({"type": "tool", "name": "get_weather"}, True),
        ({"type": "none"}, False),
    ],
)
def test_tool_choice(client: anthropic.Anthropic, model: str, choice: Any, calls: bool) -> None:
    prompt = "Reply with: hello" if calls else TOOL_PROMPT
    reply = client.messages.create(
        model=model, max_tokens=64, messages=[user(prompt)], tools=[WEATHER], tool_choice=choice
    )
    used = [b for b in reply.content if b.type == "tool_use"]
    assert bool(used) is calls
    if calls:
        assert used[0].name == "get_weather" and "city" in used[0].input  # type: ignore[operator]


def test_system_string_and_blocks_render_alike(client: anthropic.Anthropic, model: str) -> None:
    messages = [user("Reply with: rain")]
    plain = client.messages.count_tokens(model=model, system="Be brief.", messages=messages)
    blocks = client.messages.count_tokens(
        model=model, system=[{"type": "text", "text": "Be brief."}], messages=messages
    )
    bare = client.messages.count_tokens(model=model, messages=messages)
    assert plain.input_tokens == blocks.input_tokens > bare.input_tokens
    with_tools = client.messages.count_tokens(model=model, messages=messages, tools=[WEATHER])
    assert with_tools.input_tokens > bare.input_tokens


def test_thinking_enabled_streams_a_thinking_block(client: anthropic.Anthropic, model: str) -> None:
    with client.messages.stream(
        model=model,
        max_tokens=64,
        messages=[user("Reply with: paris")],
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        deltas = [e.delta.type for e in stream if e.type == "content_block_delta"]  # type: ignore[union-attr]
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert "thinking_delta" in deltas and "text_delta" in deltas
    assert "paris" in final.content[0].thinking  # type: ignore[union-attr]
    assert final.content[1].text == "paris"  # type: ignore[union-attr]


def test_thinking_budget_closes_the_block(client: anthropic.Anthropic, model: str) -> None:
    def think(budget: int) -> str:
        reply = client.messages.create(
            model=model,
            max_tokens=64,
            messages=[user("Reply with: paris")],
            thinking={"type": "enabled", "budget_tokens": budget},
            extra_body=GREEDY,
        )
        assert reply.content[0].type == "thinking"
        assert reply.content[-1].type == "text", "an answer follows the closed block"
        return reply.content[0].thinking

    free = think(1000)
    short = think(3)
    assert len(short) < len(free) and free.startswith(short), (short, free)
    counted = client.messages.count_tokens(
        model=model, messages=[{"role": "assistant", "content": short}]
    )
    bare = client.messages.count_tokens(
        model=model, messages=[{"role": "assistant", "content": ""}]
    )
    assert counted.input_tokens - bare.input_tokens <= 3


def test_stop_sequences(random_stack: Stack) -> None:
    client = anthropic.Anthropic(base_url=random_stack.base_url, api_key="x", max_retries=0)
    body: Any = {
        "model": random_stack.settings.models[0].name,
        "max_tokens": 24,
        "messages": [user("Tell me about the sea.")],
        "extra_body": GREEDY,
    }
    whole = client.messages.create(**body)
    text = whole.content[0].text  # type: ignore[union-attr]
    assert whole.stop_reason == "max_tokens" and len(text) > 12
    stop = text[8:11]
    cut = client.messages.create(**body, stop_sequences=[stop])
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
    assert cut.content[0].text == text[: text.index(stop)]  # type: ignore[union-attr]
    with client.messages.stream(**body, stop_sequences=[stop]) as stream:
        assert stream.get_final_message().stop_sequence == stop


def test_top_k_one_is_greedy(random_stack: Stack) -> None:
    client = anthropic.Anthropic(base_url=random_stack.base_url, api_key="x", max_retries=0)
    body: Any = {
        "model": random_stack.settings.models[0].name,
        "max_tokens": 12,
        "messages": [user("Tell me about the sea.")],
    }
    greedy = client.messages.create(**body, extra_body=GREEDY)
    top1 = client.messages.create(**body, extra_body={"temperature": 1.0, "top_k": 1})
    assert top1.content[0].text == greedy.content[0].text  # type: ignore[union-attr]


def _error(reply: httpx.Response) -> dict[str, Any]:
    body = reply.json()
    assert set(body) == {"type", "error"} and body["type"] == "error", body
    assert set(body["error"]) == {"type", "message"}
    return dict(body["error"])


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, 400, "invalid_request_error"),
        ({"max_tokens": 8}, 400, "invalid_request_error"),
        (
            {"max_tokens": 8, "messages": [{"role": "narrator", "content": "x"}]},
            400,
            "invalid_request_error",
        ),
        (
            {
                "max_tokens": 8,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/png", "data": ""},
                            }
                        ],
                    }
                ],
            },
            400,
            "invalid_request_error",
        ),
        (
            {
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": {"type": "tool", "name": "missing"},
                "tools": [WEATHER],
            },
            400,
            "invalid_request_error",
        ),
        (
            {"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "model": "nope"},
            404,
            "not_found_error",
        ),
    ],
)
def test_refusals_in_anthropic_envelope(
    stack: Stack, model: str, body: dict[str, Any], status: int, kind: str
) -> None:
    body = {"model": model, **body}
    for stream in (False, True):
        reply = httpx.post(
            f"{stack.base_url}/v1/messages",
            json={**body, "stream": stream},
            headers={"anthropic-version": "2023-06-01"},
            timeout=30,
        )
        assert reply.status_code == status, reply.text
        assert _error(reply)["type"] == kind


def test_image_refusal_names_the_block(stack: Stack, model: str) -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    reply = httpx.post(
        f"{stack.base_url}/v1/messages",
        json={"model": model, "max_tokens": 8, "messages": [user([image])]},
    )
    assert "image" in _error(reply)["message"]


def test_unknown_route_and_method_use_the_envelope(stack: Stack) -> None:
    assert _error(httpx.get(f"{stack.base_url}/v1/messages"))["type"] == "invalid_request_error"
    missing = httpx.post(f"{stack.base_url}/v1/messages/nope", json={})
    assert missing.status_code == 404 and _error(missing)["type"] == "not_found_error"
    # OpenAI routes keep OpenAI's envelope.
    assert "error" in httpx.post(f"{stack.base_url}/v1/chat/completions", json={}).json()


def test_sdk_raises_the_mapped_exceptions(client: anthropic.Anthropic, model: str) -> None:
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="nope", max_tokens=5, messages=[user("x")])
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model=model, max_tokens=0, messages=[user("x")])
    assert refused.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


@pytest.fixture(scope="module")
def keyed_base_url(stack: Stack) -> Iterator[str]:
    """A second façade, with an API key, in front of the same core."""
    settings = FacadeSettings(host="127.0.0.1", port=0, api_keys=("sk-local",))
    runner, port = stack.run(start_facade(stack.grpc_address, settings))
    yield f"http://127.0.0.1:{port}"
    stack.run(runner.cleanup())


def test_x_api_key_is_accepted_like_a_bearer_key(keyed_base_url: str, model: str) -> None:
    good = anthropic.Anthropic(base_url=keyed_base_url, api_key="sk-local", max_retries=0)
    assert good.messages.count_tokens(model=model, messages=[user("hi")]).input_tokens > 0
    with pytest.raises(anthropic.AuthenticationError) as refused:
        anthropic.Anthropic(
            base_url=keyed_base_url, api_key="wrong", max_retries=0
        ).messages.create(model=model, max_tokens=4, messages=[user("hi")])
    assert refused.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    body = {"model": model, "messages": [user("hi")]}
    url = f"{keyed_base_url}/v1/messages/count_tokens"
    bearer = httpx.post(url, json=body, headers={"Authorization": "Bearer sk-local"})
    assert bearer.status_code == 200
    missing = httpx.post(url, json=body)
    assert missing.status_code == 401 and _error(missing)["type"] == "authentication_error"
    # The same keys, by either header, on the OpenAI routes.
    models = httpx.get(f"{keyed_base_url}/v1/models", headers={"x-api-key": "sk-local"})
    assert models.status_code == 200
