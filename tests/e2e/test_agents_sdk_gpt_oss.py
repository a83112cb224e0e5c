"""The OpenAI Agents SDK runs a tool loop against the trained tiny gpt-oss
(service/assets/tiny-gpt-oss): the model calls the agent's function tool, the SDK runs it and
sends its output back, and the model answers, through the Responses model and the Chat
Completions model, streamed or not, with no harmony protocol text on the wire."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    Model,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    RunResult,
    RunResultStreaming,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

set_tracing_disabled(True)  # no trace export to api.openai.com

MODEL = Path(__file__).resolve().parents[2] / "service" / "assets" / "tiny-gpt-oss"
# The loop the model was trained on (training/tiny_harmony/data.py): "Weather in CITY?" with the
# weather tool gives reasoning and get_weather({"location": CITY}); after the tool's output it
# answers "It is ... in ...". Paris is a city it copies (training/tiny_harmony/evaluate.py).
PROMPT = "Weather in Paris?"
LOOP = ["reasoning_item", "tool_call_item", "tool_call_output_item", "message_output_item"]


@pytest.fixture(scope="module")
def gpt_oss(store_url: str) -> Iterator[Stack]:
    with Stack.running(model_path=MODEL, store_url=store_url) as s:
        yield s


class _Recorded(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, into: list[bytes]) -> None:
        self._stream, self._into = stream, into

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._into.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Recording(httpx.AsyncBaseTransport):
    """Keeps every response body byte the SDK reads, streamed or not."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.bodies: list[bytes] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Recorded(response.stream, self.bodies)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    def text(self) -> str:
        return b"".join(self.bodies).decode()


def _model(api: str, client: AsyncOpenAI, replay_reasoning: bool = False) -> Model:
    if api == "responses":
        return OpenAIResponsesModel(model="tiny-gpt-oss", openai_client=client)
    # The SDK's Chat model replays reasoning (as `reasoning_content`) only to DeepSeek unless
    # told to: harmony keeps a tool loop's reasoning, so a client that replays it gets the
    # prompt the Responses model gets.
    replay = (lambda _: True) if replay_reasoning else None
    return OpenAIChatCompletionsModel(
        model="tiny-gpt-oss", openai_client=client, should_replay_reasoning_content=replay
    )


async def _loop(
    stack: Stack, api: str, streamed: bool, replay_reasoning: bool = False
) -> tuple[RunResult | RunResultStreaming, list[str], str]:
    calls: list[str] = []

    @function_tool
    def get_weather(location: str) -> str:
        """The weather in a city."""
        calls.append(location)
        return "12C"

    wire = _Recording()
    http = httpx.AsyncClient(transport=wire, timeout=60)
    client = AsyncOpenAI(
        base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0, http_client=http
    )
    agent = Agent(
        name="weather",
        model=_model(api, client, replay_reasoning),
        tools=[get_weather],
        model_settings=ModelSettings(temperature=0, max_tokens=64),
    )
    result: RunResult | RunResultStreaming
    if streamed:
        result = Runner.run_streamed(agent, PROMPT, max_turns=3)
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, PROMPT, max_turns=3)
    await client.close()
    return result, calls, wire.text()


def _dump(result: RunResult | RunResultStreaming) -> str:
    items: list[Any] = [item.raw_item for item in result.new_items]
    return repr(items) + repr([r.output for r in result.raw_responses])


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_agents_sdk_tool_loop(gpt_oss: Stack, api: str, streamed: bool) -> None:
    result, calls, wire = asyncio.run(_loop(gpt_oss, api, streamed))
    # The SDK parsed the call's arguments and ran the tool with them, once.
    assert calls == ["Paris"]
    assert [item.type for item in result.new_items] == LOOP
    assert len(result.raw_responses) == 2  # the call, then the answer after the tool's output
    # The answer has the trained shape; the tiny model does not copy the tool's degrees.
    assert isinstance(result.final_output, str) and result.final_output.startswith("It is ")
    assert "get_weather" in wire and "<|" not in wire  # the bodies were read, and are clean
    assert "<|" not in _dump(result)


def test_chat_replaying_reasoning_renders_the_responses_prompt(gpt_oss: Stack) -> None:
    responses, _, _ = asyncio.run(_loop(gpt_oss, "responses", streamed=False))
    chat, calls, _ = asyncio.run(_loop(gpt_oss, "chat", streamed=False, replay_reasoning=True))
    assert calls == ["Paris"]
    usage = [
        (r.usage.input_tokens, c.usage.input_tokens)
        for r, c in zip(responses.raw_responses, chat.raw_responses, strict=True)
    ]
    # The second turn's prompt (the call, its reasoning and the tool's output) is the same.
    assert all(a == b for a, b in usage), usage
    assert chat.final_output == responses.final_output
