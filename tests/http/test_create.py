"""POST /v1/responses through the openai SDK and raw HTTP, against a real core over gRPC."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support.stack import Stack


@pytest.fixture(scope="module")
def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="sk-no-auth", max_retries=0)


@pytest.fixture(scope="module")
def model(stack: Stack) -> str:
    return stack.settings.models[0].name


def test_reply_with_hello(client: openai.OpenAI, model: str) -> None:
    resp = client.responses.create(model=model, input="Reply with: hello", max_output_tokens=64)
    assert resp.output_text == "hello"
    assert resp.status == "completed"
    assert resp.id.startswith("resp_")
    assert resp.object == "response"
    assert resp.output[0].id.startswith("msg_")
    assert resp.usage is not None
    assert resp.usage.input_tokens > 0
    assert resp.usage.output_tokens >= 1
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
    assert resp.completed_at is not None and resp.completed_at >= resp.created_at


def test_wire_object_has_no_background_key(stack: Stack, model: str) -> None:
    body = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={"model": model, "input": "Reply with: yes", "max_output_tokens": 16},
        timeout=60,
    ).json()
    assert "background" not in body
    assert body["output"][0]["content"][0]["text"] == "yes"
    assert body["temperature"] == 0.0  # the bundled model's generation_config default
    assert body["text"] == {"format": {"type": "text"}, "verbosity": "medium"}
    assert body["tool_choice"] == "auto" and body["tools"] == []
    assert set(body["usage"]["input_tokens_details"]) == {"cached_tokens", "cache_write_tokens"}
    assert set(body["usage"]["output_tokens_details"]) == {"reasoning_tokens"}


def test_bare_alias(stack: Stack, model: str) -> None:
    reply = httpx.post(
        f"{stack.base_url}/responses",
        json={"model": model, "input": "Reply with: blue", "max_output_tokens": 16},
        timeout=60,
    )
    assert reply.status_code == 200
    assert reply.json()["output"][0]["content"][0]["text"] == "blue"


def test_model_may_be_named_by_path(client: openai.OpenAI, stack: Stack) -> None:
    resp = client.responses.create(
        model=str(stack.settings.models[0]), input="Reply with: red", max_output_tokens=16
    )
    assert resp.output_text == "red"


def test_instructions_and_developer_messages(client: openai.OpenAI, model: str) -> None:
    resp = client.responses.create(
        model=model,
        instructions="You are a helpful assistant.",
        input=[
            {"role": "developer", "content": "Answer tersely."},
            {"role": "user", "content": "Reply with: green"},
        ],
        max_output_tokens=16,
    )
    assert resp.output_text == "green"
    assert resp.instructions == "You are a helpful assistant."


def test_previous_output_replays_as_input(client: openai.OpenAI, model: str) -> None:
    first = client.responses.create(model=model, input="Reply with: apple", max_output_tokens=16)
    history = [{"role": "user", "content": "Reply with: apple"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"role": "user", "content": "Reply with: banana"})
    second = client.responses.create(model=model, input=history, max_output_tokens=16)
    assert second.output_text == "banana"


def test_length_stop_is_incomplete(client: openai.OpenAI, model: str) -> None:
    resp = client.responses.create(model=model, input="Reply with: hello", max_output_tokens=1)
    assert resp.status == "incomplete"
    assert resp.incomplete_details is not None
    assert resp.incomplete_details.reason == "max_output_tokens"
    assert resp.usage is not None and resp.usage.output_tokens == 1


def test_sampling_parameters_are_echoed(client: openai.OpenAI, model: str) -> None:
    resp = client.responses.create(
        model=model,
        input="Reply with: cat",
        temperature=0.7,
        top_p=0.9,
        max_output_tokens=8,
        metadata={"k": "v"},
    )
    assert resp.temperature == 0.7 and resp.top_p == 0.9
    assert resp.metadata == {"k": "v"}
    assert resp.max_output_tokens == 8


def test_codex_style_request_is_accepted(stack: Stack, model: str) -> None:
    reply = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={
            "model": model,
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Reply with: dog"}],
                }
            ],
            "client_metadata": {"session": "x"},
            "prompt_cache_key": "abc",
            "include": ["reasoning.encrypted_content"],
            "store": False,
            "reasoning": {"summary": "auto"},
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "stream": False,
        },
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["store"] is False and body["prompt_cache_key"] == "abc"
    assert body["reasoning"]["summary"] == "auto"


def test_models_and_health(stack: Stack, model: str) -> None:
    models = httpx.get(f"{stack.base_url}/v1/models").json()
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [model]
    assert httpx.get(f"{stack.base_url}/models").status_code == 200
    health = httpx.get(f"{stack.base_url}/health")
    assert health.status_code == 200 and health.json() == {"status": "ok"}


def test_sdk_raises_typed_errors(client: openai.OpenAI, model: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="no-such-model", input="x")
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=model, input="x", temperature=5)
    assert bad.value.param == "temperature"


def test_logprobs_when_included(stack: Stack, model: str) -> None:
    body = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={
            "model": model,
            "input": "Reply with: hello",
            "include": ["message.output_text.logprobs"],
            "top_logprobs": 3,
            "max_output_tokens": 16,
        },
        timeout=60,
    ).json()
    part = body["output"][0]["content"][0]
    assert part["text"] == "hello"
    assert "".join(lp["token"] for lp in part["logprobs"]) == "hello"
    first = part["logprobs"][0]
    assert first["logprob"] <= 0.0 and len(first["top_logprobs"]) == 3
    assert first["top_logprobs"][0]["token"] == first["token"]  # greedy: the argmax
    assert body["top_logprobs"] == 3


def test_no_logprobs_unless_asked(client: openai.OpenAI, model: str) -> None:
    resp = client.responses.create(model=model, input="Reply with: hello", max_output_tokens=16)
    assert resp.output[0].content[0].logprobs == []  # type: ignore[union-attr]
