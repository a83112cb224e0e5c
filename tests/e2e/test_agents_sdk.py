"""The OpenAI Agents SDK runs a tool turn after reasoning, its history in an
`OpenAIConversationsSession` (the Conversations API), and a second turn reads that history."""

from __future__ import annotations

import asyncio

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIConversationsSession,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

set_tracing_disabled(True)  # no trace export to api.openai.com


@function_tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return "sunny" if city == "paris" else "unknown"


async def _session_run(stack: Stack) -> None:
    client = AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    agent = Agent(
        name="weather",
        model=OpenAIResponsesModel(model=stack.settings.models[0].name, openai_client=client),
        tools=[get_weather],
        model_settings=ModelSettings(
            temperature=0,
            max_tokens=96,
            extra_body={"chat_template_kwargs": {"enable_thinking": True}},
        ),
    )
    session = OpenAIConversationsSession(openai_client=client)
    first = await Runner.run(
        agent, "Use the get_weather tool with city set to paris.", session=session
    )
    kinds = [item.type for item in first.new_items]
    # Reasoning, the call, the tool's output, then (after reasoning again) the answer.
    assert kinds[:3] == ["reasoning_item", "tool_call_item", "tool_call_output_item"], kinds
    assert kinds[-1] == "message_output_item", kinds
    assert first.final_output == "sunny"
    conversation_id = session.session_id
    assert conversation_id.startswith("conv_")
    stored = await session.get_items()
    types = [item.get("type", "message") for item in stored]
    assert types[0] == "message" and "function_call" in types and "function_call_output" in types
    assert stored[0]["content"] == "Use the get_weather tool with city set to paris." or (
        stored[0]["content"][0]["text"] == "Use the get_weather tool with city set to paris."
    )
    # The server holds the same transcript the session reads.
    listed = [item async for item in client.conversations.items.list(conversation_id, order="asc")]
    assert [item.id for item in listed] == [item["id"] for item in stored]
    # A second turn runs on the history the session hands back.
    second = await Runner.run(agent, "Reply with: hello", session=session)
    assert second.final_output
    grown = await session.get_items()
    assert len(grown) > len(stored) and grown[: len(stored)] == stored
    last = await session.pop_item()
    assert last is not None and len(await session.get_items()) == len(grown) - 1
    await session.clear_session()
    with pytest.raises(openai.NotFoundError):
        await client.conversations.retrieve(conversation_id)
    await client.close()


def test_agents_sdk_conversations_session_end_to_end(each_store_stack: Stack) -> None:
    asyncio.run(_session_run(each_store_stack))
