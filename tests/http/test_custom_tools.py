"""Custom (freeform) tools on the bundled model: calls whose input follows the tool's grammar.

Codex's real `apply_patch` tool (recorded from codex-cli 0.169.1, tests/fixtures), a small Lark
tool and a regex tool, forced and free, streamed and not, and replayed as history.

NOTE: the bundled model was never trained on patches: under the grammar it writes a valid
patch head and then a file name it does not end within the output budget. Its apply_patch
calls are checked as what the grammar admits so far (a viable prefix, accepted when the call
completes); the small Lark and regex tools complete. tests/unit/test_custom_tool_grammar.py
shows the call grammar admits exactly the patches Codex's grammar admits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import llguidance
import llguidance.hf
import openai
import pytest
from transformers import AutoTokenizer

from tests.http.test_openapi import conforms
from tests.support.stack import Stack

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "codex_0.169_apply_patch_tool.json"
APPLY_PATCH: dict[str, Any] = json.loads(FIXTURE.read_text())["tool"]
TICKET = {
    "type": "custom",
    "name": "open_ticket",
    "description": "Opens a ticket; the input is its id.",
    "format": {"type": "grammar", "syntax": "regex", "definition": r"TICKET-[0-9]{3,5}"},
}
NOTE = {"type": "custom", "name": "note", "description": "Saves a note."}
PRIORITY = {
    "type": "custom",
    "name": "set_priority",
    "description": "Sets the priority.",
    "format": {
        "type": "grammar",
        "syntax": "lark",
        "definition": 'start: "priority " LEVEL LF\nLEVEL: "low" | "high"\n%import common.LF\n',
    },
}
PLAIN = "Reply with: hello"
EDIT = "Use the apply_patch tool to add a file hello.txt that says hi."


@pytest.fixture(scope="module")
def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


@pytest.fixture(scope="module")
def patch_grammar(model_path: Path) -> Any:
    """Codex's grammar compiled on its own: the referee of every generated patch."""
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    lltok = llguidance.hf.from_tokenizer(tokenizer)
    lark = llguidance.LLMatcher.grammar_from_lark(APPLY_PATCH["format"]["definition"])

    def parses(text: str, complete: bool) -> bool:
        """Whether the grammar admits `text` (whole, or so far when the call was cut short)."""
        matcher = llguidance.LLMatcher(lltok, lark)
        ids = tokenizer.encode(text, add_special_tokens=False)
        if matcher.validate_tokens(ids) != len(ids):
            return False
        matcher.consume_tokens(ids)
        return bool(matcher.is_accepting()) or not complete

    return parses


def _create(client: openai.OpenAI, stack: Stack, **fields: Any) -> Any:
    fields.setdefault("max_output_tokens", 300)
    return client.responses.create(model=stack.settings.models[0].name, **fields)


def _custom_calls(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "custom_tool_call"]


def test_forced_apply_patch_is_a_custom_call_whose_input_parses(
    client: openai.OpenAI, stack: Stack, patch_grammar: Any
) -> None:
    reply = _create(
        client,
        stack,
        input=EDIT,
        tools=[APPLY_PATCH],
        tool_choice={"type": "custom", "name": "apply_patch"},
    )
    (call,) = _custom_calls(reply)
    assert call.name == "apply_patch" and call.call_id.startswith("call_")
    assert call.id.startswith("ctc_")
    assert call.input.startswith("*** Begin Patch\n*** "), call.input
    assert patch_grammar(call.input, reply.status == "completed"), call.input
    assert not [i for i in reply.output if i.type == "function_call"]
    # The echo shows the tool and the choice as they were offered.
    assert reply.tools[0].type == "custom" and reply.tools[0].format.syntax == "lark"  # type: ignore[union-attr]
    assert reply.tool_choice.type == "custom" and reply.tool_choice.name == "apply_patch"  # type: ignore[union-attr]


def test_forced_lark_tool_completes_with_input_in_its_language(
    client: openai.OpenAI, stack: Stack
) -> None:
    reply = _create(
        client,
        stack,
        input="Set the priority.",
        tools=[PRIORITY, NOTE],
        tool_choice={"type": "custom", "name": "set_priority"},
    )
    assert reply.status == "completed"
    (call,) = _custom_calls(reply)
    assert call.status == "completed"
    assert call.input in ("priority low\n", "priority high\n"), call.input


def test_forced_regex_tool_input_matches_the_regex(client: openai.OpenAI, stack: Stack) -> None:
    reply = _create(
        client,
        stack,
        input="Open a ticket for the broken login page.",
        tools=[TICKET, NOTE],
        tool_choice={"type": "custom", "name": "open_ticket"},
    )
    (call,) = _custom_calls(reply)
    assert call.name == "open_ticket"
    assert re.fullmatch(TICKET["format"]["definition"], call.input), call.input


def test_required_choice_among_custom_tools(client: openai.OpenAI, stack: Stack) -> None:
    reply = _create(
        client,
        stack,
        input=PLAIN,
        tools=[TICKET, APPLY_PATCH],
        tool_choice={
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "custom", "name": "open_ticket"}],
        },
    )
    (call,) = _custom_calls(reply)
    assert call.name == "open_ticket"
    assert re.fullmatch(TICKET["format"]["definition"], call.input), call.input
    assert reply.tool_choice.tools == [{"type": "custom", "name": "open_ticket"}]  # type: ignore[union-attr]


def test_free_choice_still_answers_with_text(client: openai.OpenAI, stack: Stack) -> None:
    reply = _create(client, stack, input=PLAIN, tools=[APPLY_PATCH, TICKET])
    assert reply.status == "completed"
    assert not _custom_calls(reply) and reply.output_text == "hello"


def test_free_choice_call_is_generated_under_the_grammar(
    client: openai.OpenAI, stack: Stack, patch_grammar: Any
) -> None:
    """Under `auto`, a call the model opens to apply_patch still follows the grammar."""
    reply = _create(client, stack, input=EDIT, tools=[APPLY_PATCH])
    calls = _custom_calls(reply)
    for call in calls:
        assert call.name == "apply_patch"
        assert patch_grammar(call.input, reply.status == "completed"), call.input
    assert calls or reply.output_text, reply.output


def test_streamed_input_deltas_join_to_the_final_input(
    client: openai.OpenAI, stack: Stack, patch_grammar: Any
) -> None:
    with client.responses.stream(
        model=stack.settings.models[0].name,
        input=EDIT,
        tools=[APPLY_PATCH],
        tool_choice={"type": "custom", "name": "apply_patch"},
        max_output_tokens=300,
    ) as stream:
        events = list(stream)
    final = events[-1].response  # type: ignore[union-attr]  # completed or incomplete
    assert events[-1].type in ("response.completed", "response.incomplete")
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" not in kinds
    deltas = [e.delta for e in events if e.type == "response.custom_tool_call_input.delta"]
    (done,) = [e for e in events if e.type == "response.custom_tool_call_input.done"]
    (call,) = _custom_calls(final)
    assert len(deltas) > 1, "the input streams while it is generated"
    assert "".join(deltas) == done.input == call.input
    assert done.item_id == call.id
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert added[0].type == "custom_tool_call" and added[0].input == ""
    assert patch_grammar(call.input, final.status == "completed")


@pytest.mark.parametrize(
    ("tool", "choice"),
    [
        (APPLY_PATCH, {"type": "custom", "name": "apply_patch"}),
        (
            {
                "type": "function",
                "name": "add_file",
                "parameters": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["name", "text"],
                },
            },
            {"type": "function", "name": "add_file"},
        ),
    ],
)
def test_a_call_cut_by_max_output_tokens_is_incomplete(
    client: openai.OpenAI, stack: Stack, tool: dict[str, Any], choice: dict[str, Any]
) -> None:
    """A call the output budget ends mid-input leaves `incomplete` (a client must not run it),
    streamed and stored alike."""
    whole = _create(client, stack, input=EDIT, tools=[tool], tool_choice=choice)
    assert whole.output[0].type in ("custom_tool_call", "function_call")
    budget = whole.usage.output_tokens - 8  # greedy: the same call, its last tokens cut
    with client.responses.stream(
        model=stack.settings.models[0].name,
        input=EDIT,
        tools=[tool],  # type: ignore[list-item]
        tool_choice=choice,  # type: ignore[arg-type]
        max_output_tokens=budget,
    ) as stream:
        events = list(stream)
    final = events[-1].response  # type: ignore[union-attr]
    assert final.status == "incomplete" and final.incomplete_details.reason == "max_output_tokens"
    (done,) = [e.item for e in events if e.type == "response.output_item.done"]
    (call,) = [i for i in final.output if i.type in ("custom_tool_call", "function_call")]
    assert done.status == call.status == "incomplete", done
    assert client.responses.retrieve(final.id).output[0].status == "incomplete"


def test_custom_tool_calls_replay_as_history(client: openai.OpenAI, stack: Stack) -> None:
    history: list[Any] = [
        {"role": "user", "content": EDIT},
        {
            "type": "custom_tool_call",
            "call_id": "call_1",
            "name": "apply_patch",
            "input": '*** Begin Patch\n*** Add File: hello.txt\n+hi "there"\n*** End Patch\n',
        },
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"},
    ]
    reply = _create(client, stack, input=history, tools=[APPLY_PATCH], store=True)
    assert reply.status == "completed"
    counted = client.responses.input_tokens.count(
        model=stack.settings.models[0].name, input=history, tools=[APPLY_PATCH]
    )
    assert counted.input_tokens == reply.usage.input_tokens  # type: ignore[union-attr]
    # A stored custom call chains like a function call.
    forced = _create(
        client,
        stack,
        input="Open a ticket for it.",
        tools=[TICKET],
        tool_choice={"type": "custom", "name": "open_ticket"},
    )
    follow = _create(
        client,
        stack,
        previous_response_id=forced.id,
        input=[
            {
                "type": "custom_tool_call_output",
                "call_id": _custom_calls(forced)[0].call_id,
                "output": "TICKET-123 opened",
            }
        ],
        tools=[TICKET],
    )
    assert follow.status == "completed"


@pytest.mark.parametrize("hosted_tools", ["reject", "drop"])
def test_custom_tools_inside_a_namespace(make_stack: Any, hosted_tools: str) -> None:
    """Namespaces are flattened under --hosted-tools drop only (the seed refuses them)."""
    stack = make_stack(hosted_tools=hosted_tools)
    namespace = {"type": "namespace", "name": "tickets", "tools": [TICKET]}
    response = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={
            "model": stack.settings.models[0].name,
            "input": PLAIN,
            "tools": [namespace],
            "tool_choice": {"type": "custom", "name": "open_ticket"},
        },
        timeout=60,
    )
    if hosted_tools == "reject":
        assert response.status_code == 400
        assert response.json()["error"]["param"] == "tools[0].type"
        return
    assert response.status_code == 200, response.text
    (call,) = [i for i in response.json()["output"] if i["type"] == "custom_tool_call"]
    assert call["namespace"] == "tickets" and call["name"] == "open_ticket"
    assert re.fullmatch(TICKET["format"]["definition"], call["input"])


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        (
            {
                "type": "custom",
                "name": "t",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: foo"},
            },
            "tools[0].format.definition",
        ),
        (
            {
                "type": "custom",
                "name": "t",
                "format": {"type": "grammar", "syntax": "regex", "definition": "a(b"},
            },
            "tools[0].format.definition",
        ),
        (
            {
                "type": "custom",
                "name": "t",
                "format": {"type": "grammar", "syntax": "ebnf", "definition": "x"},
            },
            "tools[0].format.syntax",
        ),
        ({"type": "custom", "name": "t", "format": {"type": "json"}}, "tools[0].format.type"),
    ],
)
def test_an_invalid_grammar_is_a_400_naming_it(
    stack: Stack, tool: dict[str, Any], param: str
) -> None:
    response = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={"model": stack.settings.models[0].name, "input": PLAIN, "tools": [tool]},
        timeout=60,
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"


def test_custom_calls_conform_to_the_openapi_document(stack: Stack) -> None:
    document = httpx.get(f"{stack.base_url}/openapi.json", timeout=10).json()
    body = {
        "model": stack.settings.models[0].name,
        "input": [
            {"role": "user", "content": "Open a ticket."},
            {"type": "custom_tool_call", "call_id": "c1", "name": "open_ticket", "input": "T-1"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "done"},
        ],
        "tools": [TICKET, APPLY_PATCH],
        "tool_choice": {"type": "custom", "name": "open_ticket"},
        "max_output_tokens": 60,
    }
    assert conforms(document, "CreateResponseRequest", body) == []
    reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60).json()
    assert "custom_tool_call" in [item["type"] for item in reply["output"]]
    assert conforms(document, "Response", reply) == []
    with httpx.stream(
        "POST", f"{stack.base_url}/v1/responses", json={**body, "stream": True}, timeout=60
    ) as streamed:
        events = [json.loads(line[6:]) for line in streamed.iter_lines() if line[:6] == "data: "]
    assert "response.custom_tool_call_input.done" in [e["type"] for e in events]
    for event in events:
        assert conforms(document, "ResponseStreamEvent", event) == [], event["type"]
