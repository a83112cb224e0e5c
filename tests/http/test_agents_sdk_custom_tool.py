"""The OpenAI Agents SDK's `CustomTool` against the bundled model: the SDK's own request and
replay shapes, a regex-constrained input, and its executor's output sent back as history."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import openai
import pytest

from tests.support.stack import Stack

agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK (pip openai-agents)")

TICKET = r"TICKET-[0-9]{3,5}"


def test_agent_runs_a_custom_tool_and_replays_its_output(stack: Stack) -> None:
    agents.set_tracing_disabled(True)
    seen: list[str] = []

    async def open_ticket(context: Any, raw_input: str) -> str:
        seen.append(raw_input)
        return f"{raw_input} opened"

    tool = agents.CustomTool(
        name="open_ticket",
        description="Opens a ticket; the input is its id.",
        on_invoke_tool=open_ticket,
        format={"type": "grammar", "syntax": "regex", "definition": TICKET},
    )
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    model = agents.OpenAIResponsesModel(model=stack.settings.models[0].name, openai_client=client)
    agent = agents.Agent(
        name="helpdesk",
        instructions="You open tickets.",
        model=model,
        tools=[tool],
        # The first turn must call; the SDK then resets the choice so the next turn may answer.
        model_settings=agents.ModelSettings(tool_choice="required", max_tokens=40),
    )
    result = asyncio.run(agents.Runner.run(agent, "Open a ticket for the login bug.", max_turns=3))
    assert seen and all(re.fullmatch(TICKET, value) for value in seen), seen
    calls = [i.raw_item for i in result.new_items if i.type == "tool_call_item"]
    outputs = [i.raw_item for i in result.new_items if i.type == "tool_call_output_item"]
    assert calls[0].type == "custom_tool_call" and calls[0].input == seen[0]
    assert outputs[0]["type"] == "custom_tool_call_output"
    # The SDK sent the call and its output back: the run went on past the first turn.
    assert len(result.raw_responses) >= 2
