"""POST /v1/chat/completions through the OpenAI SDK: create, stream, tools, parse, n, stop."""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.support.stack import Stack
from tests.support.tools import WEATHER

TOOL_PROMPT = "Use the get_weather tool with city set to paris."
CHAT_WEATHER: Any = {
    "type": "function",
    "function": {k: v for k, v in WEATHER.items() if k != "type"},
}


@pytest.fixture(scope="module")
def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


@pytest.fixture(scope="module")
def model(stack: Stack) -> str:
    return stack.settings.models[0].name


def user(text: str) -> Any:
    return {"role": "user", "content": text}


def test_create_answers_with_usage(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model, messages=[user("Reply with: tokyo")], temperature=0
    )
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    choice = reply.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "tokyo"
    assert choice.finish_reason == "stop"
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_system_and_history_render_like_responses(stack: Stack, model: str) -> None:
    """The same history renders the same prompt through either API (count via Responses)."""
    chat = httpx.post(
        f"{stack.base_url}/v1/chat/completions",
        json={
            "model": model,
            "messages": [
                {"role": "system", "content": "Be brief."},
                user("Reply with: one"),
                {"role": "assistant", "content": "one"},
                user("Reply with: two"),
            ],
            "max_tokens": 8,
            "temperature": 0,
        },
    ).json()
    counted = httpx.post(
        f"{stack.base_url}/v1/responses/input_tokens",
        json={
            "model": model,
            "instructions": None,
            "input": [
                {"role": "system", "content": "Be brief."},
                user("Reply with: one"),
                {"role": "assistant", "content": "one"},
                user("Reply with: two"),
            ],
        },
    ).json()
    assert chat["usage"]["prompt_tokens"] == counted["input_tokens"]
    assert chat["choices"][0]["message"]["content"] == "two"


def test_stream_matches_create_and_reports_usage(client: openai.OpenAI, model: str) -> None:
    messages = [user("Reply with: the red fox")]
    whole = client.chat.completions.create(model=model, messages=messages, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=messages,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]
    assert len({c.id for c in chunks}) == 1


def test_stream_without_usage_option_has_no_usage_chunk(stack: Stack, model: str) -> None:
    body = {"model": model, "messages": [user("Reply with: rain")], "stream": True}
    with httpx.stream("POST", f"{stack.base_url}/chat/completions", json=body) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    payloads = [json.loads(line[6:]) for line in lines[:-1]]
    assert all(p["choices"] and "usage" not in p for p in payloads)


def test_tool_call_round_trip(client: openai.OpenAI, model: str) -> None:
    messages: list[Any] = [user(TOOL_PROMPT)]
    first = client.chat.completions.create(model=model, messages=messages, tools=[CHAT_WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "paris"}
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    second = client.chat.completions.create(model=model, messages=messages, tools=[CHAT_WEATHER])
    assert second.choices[0].message.content == "sunny"
    assert second.choices[0].finish_reason == "stop"


def test_tool_call_streams_as_tool_call_deltas(make_stack: Any) -> None:
    # One delta per decode step: with the default 10 ms window a fast CPU can decode the whole
    # argument inside one window, and it would then arrive as one delta (as in test_tools).
    stack = make_stack(stream_window_ms=0)
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    model = stack.settings.models[0].name
    chunks = list(
        client.chat.completions.create(
            model=model, messages=[user(TOOL_PROMPT)], tools=[CHAT_WEATHER], stream=True
        )
    )
    deltas = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].id and deltas[0].function and deltas[0].function.name == "get_weather"
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    assert json.loads(arguments) == {"city": "paris"}
    assert len(deltas) > 2, "arguments stream while they are generated"
    assert {d.index for d in deltas} == {0}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_forced_tool_choice(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=[user("Reply with: hello")],
        tools=[CHAT_WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    (call,) = reply.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert "city" in json.loads(call.function.arguments)  # type: ignore[union-attr]


class Reply(BaseModel):
    answer: Literal["hello", "world", "yes", "no"]
    sure: bool


def test_parse_with_a_pydantic_model(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.parse(
        model=model, messages=[user("Reply with: hello")], response_format=Reply, max_tokens=64
    )
    parsed = reply.choices[0].message.parsed
    assert isinstance(parsed, Reply)
    assert Reply.model_validate_json(reply.choices[0].message.content or "") == parsed


def test_json_object_format(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=[user("Reply with: hello")],
        response_format={"type": "json_object"},
        max_tokens=64,
    )
    text = reply.choices[0].message.content or ""
    if reply.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)
    else:  # the grammar holds to the cap: a free-form object may still be open there
        assert reply.choices[0].finish_reason == "length" and text.lstrip().startswith("{")


def test_n_choices_seeded_and_reproducible(random_stack: Stack) -> None:
    """On the random model (a flat distribution): seeds decide, and choices differ."""
    client = openai.OpenAI(base_url=f"{random_stack.base_url}/v1", api_key="x", max_retries=0)

    def sample() -> list[str]:
        reply = client.chat.completions.create(
            model=random_stack.settings.models[0].name,
            messages=[user("Tell me about the sea.")],
            n=3,
            seed=42,
            temperature=1.0,
            max_tokens=8,
        )
        assert [c.index for c in reply.choices] == [0, 1, 2]
        completion = sum(len(c.message.content or "") > 0 for c in reply.choices)
        assert completion == 3
        return [c.message.content or "" for c in reply.choices]

    first = sample()
    assert sample() == first, "the same seed samples the same choices"
    assert len(set(first)) > 1, "each choice samples with its own seed"


def test_n_choices_stream_with_usage(client: openai.OpenAI, model: str) -> None:
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=[user("Reply with: rain")],
            n=2,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = ["", ""]
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
    assert texts == ["rain", "rain"]
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens >= 2


def test_stop_sequence_cuts_the_output(random_stack: Stack) -> None:
    """On the random model (long greedy text): the output ends before the first stop string."""
    client = openai.OpenAI(base_url=f"{random_stack.base_url}/v1", api_key="x", max_retries=0)
    body: Any = {
        "model": random_stack.settings.models[0].name,
        "messages": [user("Tell me about the sea.")],
        "temperature": 0,
        "max_tokens": 24,
    }
    text = client.chat.completions.create(**body).choices[0].message.content or ""
    assert len(text) > 12, text
    stop = text[8:11]
    expected = text[: text.index(stop)]
    cut = client.chat.completions.create(**body, stop=[stop, "\x00never"])
    assert cut.choices[0].message.content == expected
    assert cut.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(**body, stop=stop, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == expected
    # A stop string whose start appears but never completes holds nothing back at the end.
    partial = client.chat.completions.create(**body, stop=text[-3:] + "\x00")
    assert partial.choices[0].message.content == text
    assert partial.choices[0].finish_reason == "length"


def test_max_tokens_finishes_with_length(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model, messages=[user("Reply with: the red fox jumps")], max_completion_tokens=1
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 1


def test_logprobs(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model, messages=[user("Reply with: tokyo")], logprobs=True, top_logprobs=2
    )
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and logprobs.content
    assert "".join(t.token for t in logprobs.content) == reply.choices[0].message.content
    assert all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in logprobs.content)


def test_reasoning_surfaces_as_reasoning_content(stack: Stack, model: str) -> None:
    body = {
        "model": model,
        "messages": [user("Think first, then reply with: cloudy")],
        "max_tokens": 64,
    }
    reply = httpx.post(f"{stack.base_url}/v1/chat/completions", json=body, timeout=60).json()
    message = reply["choices"][0]["message"]
    assert message["content"] == "cloudy"
    assert message["reasoning_content"]
    assert message["reasoning"] == message["reasoning_content"]  # both names, one text
    assert reply["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    with httpx.stream(
        "POST", f"{stack.base_url}/v1/chat/completions", json={**body, "stream": True}
    ) as streamed:
        payloads = [
            json.loads(line[6:]) for line in streamed.iter_lines() if line.startswith("data: {")
        ]
    deltas = [p["choices"][0]["delta"] for p in payloads]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == message["reasoning_content"]
    assert "".join(d.get("reasoning", "") for d in deltas) == message["reasoning"]
    assert "".join(d.get("content") or "" for d in deltas) == "cloudy"


def test_prompt_cache_is_shared_with_responses(
    client: openai.OpenAI, stack: Stack, model: str
) -> None:
    """A Responses turn continuing a chat turn's history reuses its KV, and the reverse."""
    history: list[Any] = [user("Reply with: the blue whale sings")]
    chat = client.chat.completions.create(model=model, messages=history, temperature=0)
    history.append({"role": "assistant", "content": chat.choices[0].message.content})
    history.append(user("Reply with: green"))
    responses = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    second = responses.responses.create(model=model, input=history, temperature=0, store=False)
    assert second.usage is not None and chat.usage is not None
    assert second.usage.input_tokens_details.cached_tokens >= chat.usage.prompt_tokens
    history.append({"role": "assistant", "content": second.output_text})
    history.append(user("Reply with: yellow"))
    third = client.chat.completions.create(model=model, messages=history, temperature=0)
    assert third.usage is not None and third.usage.prompt_tokens_details is not None
    assert third.usage.prompt_tokens_details.cached_tokens >= second.usage.input_tokens


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        ({"model": "M"}, 400, "messages", "missing_required_parameter"),
        ({"model": "M", "messages": []}, 400, "messages", "empty_array"),
        ({"model": "M", "messages": "hi"}, 400, "messages", "invalid_type"),
        (
            {"model": "M", "messages": [{"role": "narrator", "content": "x"}]},
            400,
            "messages[0].role",
            "invalid_value",
        ),
        (
            {
                "model": "M",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}
                        ],
                    }
                ],
            },
            400,
            "messages[0].content[0].type",
            "unsupported_content",
        ),
        ({"model": "M", "messages": [{"role": "user", "content": "x"}], "n": 0}, 400, "n", None),
        (
            {"model": "M", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            400,
            "max_tokens",
            "invalid_value",
        ),
        (
            {"model": "M", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2},
            400,
            "top_logprobs",
            None,
        ),
        (
            {
                "model": "M",
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web_search"}],
            },
            400,
            "tools[0].type",
            "unsupported_tool",
        ),
        (
            {"model": "M", "messages": [{"role": "user", "content": "x"}], "stop": [""]},
            400,
            "stop",
            "invalid_value",
        ),
        (
            {"model": "M", "messages": [{"role": "user", "content": "x"}], "temperature": 3},
            400,
            "temperature",
            "invalid_value",
        ),
        ({"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, "model", None),
    ],
)
def test_refusals_in_openai_envelope(
    stack: Stack, body: dict[str, Any], status: int, param: str, code: str | None
) -> None:
    if body.get("model") == "M":
        body = {**body, "model": stack.settings.models[0].name}
    for stream in (False, True):
        reply = httpx.post(
            f"{stack.base_url}/v1/chat/completions", json={**body, "stream": stream}, timeout=30
        )
        assert reply.status_code == status, reply.text
        error = reply.json()["error"]
        assert error["param"] == param
        assert error["type"] == "invalid_request_error"
        if code is not None:
            assert error["code"] == code


def test_sdk_raises_the_mapped_exception(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[user("x")])


def test_template_kwargs_and_reasoning_effort_reach_the_template(stack: Stack, model: str) -> None:
    """enable_thinking opens the think block; reasoning_effort rides along as a kwarg.

    NOTE: replies with reasoning are remembered by the core's reasoning echo; words of
    test_compaction's chain (rain, hello, ...) would change its token counts, so: paris.
    """
    body = {
        "model": model,
        "messages": [user("Reply with: paris")],
        "max_tokens": 64,
        "temperature": 0,
        "reasoning_effort": "low",
        "chat_template_kwargs": {"enable_thinking": True},
    }
    reply = httpx.post(f"{stack.base_url}/v1/chat/completions", json=body, timeout=60).json()
    message = reply["choices"][0]["message"]
    assert "paris" in message["reasoning_content"] and message["content"] == "paris"
    plain = httpx.post(
        f"{stack.base_url}/v1/chat/completions",
        json={k: v for k, v in body.items() if k != "chat_template_kwargs"},
        timeout=60,
    ).json()
    assert plain["usage"]["prompt_tokens"] < reply["usage"]["prompt_tokens"]


def test_penalties_change_a_greedy_answer(random_stack: Stack) -> None:
    client = openai.OpenAI(base_url=f"{random_stack.base_url}/v1", api_key="x", max_retries=0)
    body: Any = {
        "model": random_stack.settings.models[0].name,
        "messages": [user("Tell me about the sea.")],
        "temperature": 0,
        "max_tokens": 24,
    }
    plain = client.chat.completions.create(**body).choices[0].message.content
    penalised = client.chat.completions.create(**body, frequency_penalty=2.0, presence_penalty=2.0)
    assert penalised.choices[0].message.content != plain
