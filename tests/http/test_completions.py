"""POST /v1/completions (legacy): raw prompts through the OpenAI SDK's completions.create."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.support.stack import Stack


@pytest.fixture(scope="module")
def client(random_stack: Stack) -> openai.OpenAI:
    """The random model: raw text continues for as long as it is let."""
    return openai.OpenAI(base_url=f"{random_stack.base_url}/v1", api_key="x", max_retries=0)


@pytest.fixture(scope="module")
def model(random_stack: Stack) -> str:
    return random_stack.settings.models[0].name


def test_create_continues_the_raw_prompt(client: openai.OpenAI, model: str, stack: Stack) -> None:
    reply = client.completions.create(model=model, prompt="The sea", max_tokens=6, temperature=0)
    assert reply.object == "text_completion" and reply.id.startswith("cmpl-")
    (choice,) = reply.choices
    assert choice.text and choice.finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 6
    # No chat template around it: far fewer tokens than the same text as a chat turn.
    templated = httpx.post(
        f"{stack.base_url}/v1/responses/input_tokens",
        json={"model": stack.settings.models[0].name, "input": "The sea"},
    ).json()["input_tokens"]
    assert reply.usage.prompt_tokens < templated


def test_default_max_tokens_is_sixteen(client: openai.OpenAI, model: str) -> None:
    reply = client.completions.create(model=model, prompt="The sea")
    assert reply.usage is not None and reply.usage.completion_tokens == 16


def test_stream_matches_create(client: openai.OpenAI, model: str) -> None:
    body: Any = {"model": model, "prompt": "Once upon", "max_tokens": 8, "temperature": 0}
    whole = client.completions.create(**body)
    chunks = list(
        client.completions.create(**body, stream=True, stream_options={"include_usage": True})
    )
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]


def test_logprobs_and_echo(client: openai.OpenAI, model: str) -> None:
    reply = client.completions.create(
        model=model, prompt="The sea", max_tokens=5, temperature=0, logprobs=2
    )
    lp = reply.choices[0].logprobs
    assert lp is not None and lp.tokens and lp.token_logprobs and lp.top_logprobs
    assert "".join(lp.tokens) == reply.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    assert all(1 <= len(top) <= 2 for top in lp.top_logprobs)
    echoed = client.completions.create(
        model=model, prompt="The sea", max_tokens=5, temperature=0, echo=True
    )
    assert echoed.choices[0].text == "The sea" + reply.choices[0].text


def test_several_prompts_times_n(client: openai.OpenAI, model: str) -> None:
    reply = client.completions.create(
        model=model, prompt=["The sea", "Once upon"], n=2, max_tokens=4, temperature=0
    )
    assert [c.index for c in reply.choices] == [0, 1, 2, 3]
    texts = [c.text for c in reply.choices]
    assert texts[0] == texts[1] and texts[2] == texts[3]  # greedy: both choices alike
    single = client.completions.create(model=model, prompt="Once upon", max_tokens=4, temperature=0)
    assert texts[2] == single.choices[0].text
    assert reply.usage is not None and single.usage is not None
    assert reply.usage.completion_tokens == 16


def test_stop_and_seed(client: openai.OpenAI, model: str) -> None:
    body: Any = {"model": model, "prompt": "The sea", "max_tokens": 16, "temperature": 0}
    text = client.completions.create(**body).choices[0].text
    stop = text[6:9]
    cut = client.completions.create(**body, stop=stop)
    assert cut.choices[0].text == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    sampled: Any = {**body, "temperature": 1.0, "seed": 5}
    first = client.completions.create(**sampled).choices[0].text
    assert client.completions.create(**sampled).choices[0].text == first


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"prompt": [1, 2, 3]}, "prompt"),
        ({"prompt": []}, "prompt"),
        ({"suffix": "x"}, "suffix"),
        ({"logprobs": 6}, "logprobs"),
        ({"logprobs": 1, "echo": True}, "echo"),
        ({"best_of": 3}, "best_of"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"prompt": None}, "prompt"),
    ],
)
def test_refusals(random_stack: Stack, model: str, extra: dict[str, Any], param: str) -> None:
    body = {"model": model, "prompt": "x", **extra}
    if extra.get("prompt", "") is None:
        del body["prompt"]
    reply = httpx.post(f"{random_stack.base_url}/v1/completions", json=body, timeout=30)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param
