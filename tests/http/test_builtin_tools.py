"""The client-run built-in tools `shell`, `local_shell` and `apply_patch` through the OpenAI
Python SDK on the bundled model: forced calls leave as typed items (streamed and not), the
client's outputs come back as input items, and `tool_choice` naming one is enforced."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from agents.apply_diff import apply_diff

from tests.http.test_openapi import conforms
from tests.support.stack import Stack
from tests.support.tools import WEATHER

SHELL = {"type": "shell", "environment": {"type": "local"}}
LOCAL_SHELL = {"type": "local_shell"}
APPLY_PATCH = {"type": "apply_patch"}


@pytest.fixture(scope="module")
def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def _create(client: openai.OpenAI, stack: Stack, **fields: Any) -> Any:
    fields.setdefault("max_output_tokens", 200)
    return client.responses.create(model=stack.settings.models[0].name, **fields)


def _of(response: Any, kind: str) -> list[Any]:
    return [item for item in response.output if item.type == kind]


def test_forced_shell_call_is_a_shell_call_item(client: openai.OpenAI, stack: Stack) -> None:
    reply = _create(
        client, stack, input="List the files here.", tools=[SHELL], tool_choice={"type": "shell"}
    )
    assert reply.status == "completed"
    (call,) = _of(reply, "shell_call")
    assert call.id.startswith("sh_") and call.call_id.startswith("call_")
    assert call.status == "completed"
    assert call.action.commands and all(isinstance(c, str) for c in call.action.commands)
    assert not _of(reply, "function_call")
    # The echo shows the tool and the choice as offered.
    assert reply.tools[0].type == "shell" and reply.tool_choice.type == "shell"  # type: ignore[union-attr]


def test_forced_apply_patch_streams_an_apply_patch_call(
    client: openai.OpenAI, stack: Stack
) -> None:
    with client.responses.stream(
        model=stack.settings.models[0].name,
        input="Create hello.txt that says hi.",
        tools=[APPLY_PATCH],
        tool_choice={"type": "apply_patch"},
        max_output_tokens=200,
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    added = [e for e in events if e.type == "response.output_item.added"]
    done = [e for e in events if e.type == "response.output_item.done"]
    assert [e.item.type for e in added] == ["apply_patch_call"], kinds
    assert added[0].item.status == "in_progress" and done[0].item.status == "completed"
    # The model's freeform input never shows: the call arrives as its typed item.
    assert not [k for k in kinds if "custom_tool_call" in k or "function_call" in k], kinds
    (call,) = _of(final, "apply_patch_call")
    assert call.id == added[0].item.id and call.id.startswith("apc_")
    operation = call.operation
    assert operation.path and operation.type in ("create_file", "update_file", "delete_file")
    if operation.type == "create_file":
        assert apply_diff("", operation.diff, mode="create"), operation.diff
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_forced_local_shell_call(client: openai.OpenAI, stack: Stack) -> None:
    reply = _create(
        client,
        stack,
        input="Show the date.",
        tools=[LOCAL_SHELL],
        tool_choice={"type": "local_shell"},
    )
    (call,) = _of(reply, "local_shell_call")
    assert call.id.startswith("lsh_") and call.action.type == "exec"
    assert call.action.command and all(isinstance(c, str) for c in call.action.command)


def test_builtin_outputs_replay_as_input_items(client: openai.OpenAI, stack: Stack) -> None:
    """A whole agent history of the three tools: the calls and their outputs render, and the
    stored chain continues from a typed call with its output alone."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Make hello.txt, then show it."},
        {
            "type": "apply_patch_call",
            "call_id": "call_p",
            "status": "completed",
            "operation": {"type": "create_file", "path": "hello.txt", "diff": "+hi\n"},
        },
        {"type": "apply_patch_call_output", "call_id": "call_p", "status": "completed"},
        {
            "type": "shell_call",
            "call_id": "call_s",
            "action": {"commands": ["cat hello.txt"], "timeout_ms": 1000},
        },
        {
            "type": "shell_call_output",
            "call_id": "call_s",
            "output": [
                {"stdout": "hi\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
            ],
        },
        {
            "type": "local_shell_call",
            "call_id": "call_l",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        {"type": "local_shell_call_output", "id": "call_l", "output": "hello.txt\n"},
    ]
    tools = [SHELL, APPLY_PATCH, LOCAL_SHELL]
    reply = _create(client, stack, input=history, tools=tools, store=True)
    assert reply.status == "completed"
    counted = client.responses.input_tokens.count(
        model=stack.settings.models[0].name, input=history, tools=tools
    )
    assert counted.input_tokens == reply.usage.input_tokens  # type: ignore[union-attr]
    items = client.responses.input_items.list(reply.id, order="asc").data
    assert [i.type for i in items][1:] == [h["type"] for h in history[1:]]
    assert items[2].status == "completed" and items[6].call_id == "call_l"  # type: ignore[union-attr]
    forced = _create(
        client, stack, input="Run ls.", tools=[SHELL], tool_choice={"type": "shell"}, store=True
    )
    (call,) = _of(forced, "shell_call")
    follow = _create(
        client,
        stack,
        previous_response_id=forced.id,
        input=[
            {
                "type": "shell_call_output",
                "call_id": call.call_id,
                "output": [{"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "timeout"}}],
            }
        ],
        tools=[SHELL],
    )
    assert follow.status == "completed"


def test_builtin_calls_reach_the_model_as_their_tools(client: openai.OpenAI, stack: Stack) -> None:
    """The output a shell call returns is what the model reads: a longer output costs more
    input tokens, and the same history with a typed call counts as its function twin."""
    call = {"type": "shell_call", "call_id": "call_1", "action": {"commands": ["ls"]}}
    twin = {
        "type": "function_call",
        "call_id": "call_1",
        "name": "shell",
        "arguments": json.dumps({"commands": ["ls"]}),
    }

    def count(items: list[dict[str, Any]]) -> int:
        user = {"role": "user", "content": "List the files."}
        counted = client.responses.input_tokens.count(
            model=stack.settings.models[0].name, input=[user, *items], tools=[SHELL]
        )
        return int(counted.input_tokens)

    def output(stdout: str) -> dict[str, Any]:
        entry = {"stdout": stdout, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
        return {"type": "shell_call_output", "call_id": "call_1", "output": [entry]}

    short, longer = count([call, output("a\n")]), count([call, output("a\nb c d e f\n" * 5)])
    assert longer > short
    twin_output = {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "a\n(exit code 0)",
    }
    assert count([twin, twin_output]) == short


@pytest.mark.parametrize(
    ("tools", "choice"),
    [
        ([WEATHER], {"type": "shell"}),
        ([SHELL], {"type": "apply_patch"}),
        ([APPLY_PATCH], {"type": "local_shell"}),
    ],
)
def test_tool_choice_naming_a_builtin_not_offered_is_a_400(
    stack: Stack, tools: list[dict[str, Any]], choice: dict[str, Any]
) -> None:
    response = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={
            "model": stack.settings.models[0].name,
            "input": "hi",
            "tools": tools,
            "tool_choice": choice,
        },
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "tool_choice" and error["type"] == "invalid_request_error"


def test_a_hosted_shell_stays_refused(stack: Stack) -> None:
    """A `shell` in an OpenAI container is hosted: refused as other hosted tools are."""
    response = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={
            "model": stack.settings.models[0].name,
            "input": "hi",
            "tools": [{"type": "shell", "environment": {"type": "container_auto"}}],
        },
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "unsupported_tool"


def test_builtin_calls_conform_to_the_openapi_document(stack: Stack) -> None:
    """Requests, responses and stream events of the three tools, against /openapi.json; a
    streamed shell call carries its commands in `response.shell_call_command.*` events."""
    document = httpx.get(f"{stack.base_url}/openapi.json", timeout=10).json()
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Show hello.txt."},
        {"type": "shell_call", "call_id": "c1", "action": {"commands": ["cat hello.txt"]}},
        {
            "type": "shell_call_output",
            "call_id": "c1",
            "output": [
                {"stdout": "hi\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
            ],
        },
        {
            "type": "apply_patch_call",
            "call_id": "c2",
            "status": "completed",
            "operation": {"type": "update_file", "path": "hello.txt", "diff": "@@\n-hi\n+ho\n"},
        },
        {"type": "apply_patch_call_output", "call_id": "c2", "status": "failed", "output": "no"},
        {
            "type": "local_shell_call",
            "call_id": "c3",
            "action": {"type": "exec", "command": ["ls"]},
        },
        {"type": "local_shell_call_output", "call_id": "c3", "output": "hello.txt"},
    ]
    for kind in ("shell", "apply_patch", "local_shell"):
        body = {
            "model": stack.settings.models[0].name,
            "input": history,
            "tools": [SHELL, APPLY_PATCH, LOCAL_SHELL],
            "tool_choice": {"type": kind},
            "max_output_tokens": 200,
        }
        assert conforms(document, "CreateResponseRequest", body) == []
        reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60).json()
        assert [item["type"] for item in reply["output"]][-1] == f"{kind}_call", reply
        assert conforms(document, "Response", reply) == []
        with httpx.stream(
            "POST", f"{stack.base_url}/v1/responses", json={**body, "stream": True}, timeout=60
        ) as streamed:
            lines = streamed.iter_lines()
            events = [json.loads(line[6:]) for line in lines if line[:6] == "data: "]
        for event in events:
            assert conforms(document, "ResponseStreamEvent", event) == [], event["type"]
        final = events[-1]["response"]["output"][-1]
        commands = [e for e in events if e["type"] == "response.shell_call_command.done"]
        if kind == "shell":
            assert [e["command"] for e in commands] == final["action"]["commands"]
            # The commands stream as they are written, inside the item added first.
            deltas = [e for e in events if e["type"] == "response.shell_call_command.delta"]
            for index, command in enumerate(final["action"]["commands"]):
                pieces = [e["delta"] for e in deltas if e["command_index"] == index]
                assert "".join(pieces) == command
            assert len(deltas) > len(commands)  # token by token, not each command whole
            kinds = [e["type"] for e in events]
            first = kinds.index("response.shell_call_command.added")
            assert kinds[first - 1] == "response.output_item.added"
        else:
            assert commands == []


def test_allowed_tools_name_builtins_by_type(client: openai.OpenAI, stack: Stack) -> None:
    reply = _create(
        client,
        stack,
        input="Create hello.txt that says hi.",
        tools=[SHELL, APPLY_PATCH, WEATHER],
        tool_choice={
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "apply_patch"}],
        },
    )
    assert [item.type for item in reply.output][-1] == "apply_patch_call"
    assert reply.tool_choice.tools == [{"type": "apply_patch"}]  # type: ignore[union-attr]


def _execute(call: Any, root: Path) -> dict[str, Any]:
    """What a client does with a call: the patch applied, the commands run (only `ls`/`echo`,
    in `root`; the bundled model's commands are noise), and the output item to send back."""
    if call.type == "apply_patch_call":
        op = call.operation
        target = root / op.path
        if op.type != "create_file" or not target.resolve().is_relative_to(root.resolve()):
            return {"type": "apply_patch_call_output", "call_id": call.call_id, "status": "failed"}
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(apply_diff("", op.diff, mode="create"))
        return {"type": "apply_patch_call_output", "call_id": call.call_id, "status": "completed"}
    entries = []
    for command in call.action.commands:
        argv = command.split()
        if argv and argv[0] in ("ls", "echo"):
            done = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
            entry = {"stdout": done.stdout, "stderr": done.stderr, "code": done.returncode}
        else:
            entry = {"stdout": "", "stderr": f"sh: {command}: not found\n", "code": 127}
        code = entry.pop("code")
        entries.append({**entry, "outcome": {"type": "exit", "exit_code": code}})
    return {"type": "shell_call_output", "call_id": call.call_id, "output": entries}


@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
def test_a_client_loop_by_hand_ends_with_an_answer(
    client: openai.OpenAI, stack: Stack, tmp_path: Path, streamed: bool
) -> None:
    """The OpenAI SDK by hand: a forced patch, applied in a temp dir, its output sent back on
    the stored chain, then whatever the model calls run the same way until it answers."""
    model = stack.settings.models[0].name

    def turn(**fields: Any) -> Any:
        fields = {"model": model, "tools": [SHELL, APPLY_PATCH], "max_output_tokens": 200, **fields}
        if not streamed:
            return client.responses.create(**fields)
        with client.responses.stream(**fields) as stream:
            for _ in stream:
                pass
            return stream.get_final_response()

    reply = turn(input="Create hello.txt that says hi.", tool_choice={"type": "apply_patch"})
    (call,) = _of(reply, "apply_patch_call")
    first = _execute(call, tmp_path)
    if call.operation.type == "create_file":
        assert (tmp_path / call.operation.path).read_text() == apply_diff(
            "", call.operation.diff, mode="create"
        )
    outputs = [first]
    for _ in range(6):
        reply = turn(previous_response_id=reply.id, input=outputs)
        calls = [i for i in reply.output if i.type in ("shell_call", "apply_patch_call")]
        if not calls:
            break
        outputs = [_execute(c, tmp_path) for c in calls]
    assert reply.status == "completed"
    assert reply.output[-1].type == "message" and reply.output_text


def test_a_conversation_holds_builtin_items(client: openai.OpenAI, stack: Stack) -> None:
    """Conversation items of the three tools list back as added, and a turn on the
    conversation reads them (its forced call joins them)."""
    items: list[Any] = [
        {"type": "message", "role": "user", "content": "Make a.txt."},
        {
            "type": "apply_patch_call",
            "call_id": "c1",
            "status": "completed",
            "operation": {"type": "create_file", "path": "a.txt", "diff": "+a\n"},
        },
        {"type": "apply_patch_call_output", "call_id": "c1", "status": "completed"},
    ]
    conversation = client.conversations.create(items=items)
    listed = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.type for i in listed] == ["message", "apply_patch_call", "apply_patch_call_output"]
    assert listed[1].id.startswith("apc_") and listed[2].id.startswith("apco_")  # type: ignore[union-attr]
    reply = _create(
        client,
        stack,
        conversation=conversation.id,
        input="Show it.",
        tools=[SHELL],
        tool_choice={"type": "shell"},
    )
    (call,) = _of(reply, "shell_call")
    later = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.type for i in later][-1] == "shell_call" and later[-1].id == call.id
