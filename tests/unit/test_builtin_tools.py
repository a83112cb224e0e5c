"""The built-in client tools as pure conversions: patches <-> operations, generated calls ->
typed items, typed items -> what the model sees, the event machine holding a call until it is
whole, and the JSON of every item against the OpenAI SDK's own types."""

from __future__ import annotations

import itertools
import json
from typing import Any

import llguidance
import pytest
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.responses import from_proto
from mlx_responses.http_facade.responses.from_proto import event_to_json
from mlx_responses.http_facade.responses.to_proto import item_from_json, params_from_json
from mlx_responses.service.errors import ServiceError
from mlx_responses.service.responses import builtin_tools as lowering
from mlx_responses.service.responses.events import EventAssembler
from mlx_responses.service.responses.tool_policy import ResolvedTools
from mlx_responses.service.text import builtin_tools as bt
from mlx_responses.service.text.prompt import items_to_messages
from openai.types.responses import (
    ResponseInputItemParam,
    ResponseOutputItem,
    ResponseStreamEvent,
)
from pydantic import TypeAdapter

from mlx_responses.v1 import responses_pb2 as pb

CREATE = "*** Begin Patch\n*** Add File: src/hello.txt\n+hi\n+there\n*** End Patch\n"
UPDATE = (
    "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-    return 1\n+    return 2\n"
    "*** End Patch\n"
)
DELETE = "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch\n"


@pytest.mark.parametrize(
    ("patch", "kind", "path", "diff"),
    [
        (CREATE, pb.APPLY_PATCH_OPERATION_TYPE_CREATE_FILE, "src/hello.txt", "+hi\n+there\n"),
        (
            UPDATE,
            pb.APPLY_PATCH_OPERATION_TYPE_UPDATE_FILE,
            "a.py",
            "@@ def f():\n-    return 1\n+    return 2\n",
        ),
        (DELETE, pb.APPLY_PATCH_OPERATION_TYPE_DELETE_FILE, "old.txt", None),
    ],
)
def test_a_patch_is_one_operation_and_back(
    patch: str, kind: int, path: str, diff: str | None
) -> None:
    operation = bt.parse_patch(patch)
    assert (operation.type, operation.path) == (kind, path)
    assert (operation.diff if operation.HasField("diff") else None) == diff
    assert bt.patch_text(operation) == patch
    assert bt.parse_patch(patch.rstrip("\n")) == operation  # `*** End Patch` needs no LF


@pytest.mark.parametrize(
    "text",
    [
        "*** Begin Patch\n*** Add File: a\n+x\n",  # cut short
        "*** Begin Patch\n*** Add File: a\n*** End Patch\n",  # a new file with no lines
        "*** Begin Patch\n*** Delete File: a\n+x\n*** End Patch\n",
        "*** Begin Patch\n*** Add File: \n+x\n*** End Patch\n",  # no path
        "*** Begin Patch\n*** Copy File: a\n*** End Patch\n",
    ],
)
def test_what_is_not_one_operation_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        bt.parse_patch(text)


def test_the_patch_grammar_compiles() -> None:
    lark = llguidance.LLMatcher.grammar_from_lark(bt.PATCH_GRAMMAR)
    assert not llguidance.LLMatcher.validate_grammar(lark)


def test_generated_shell_calls_become_typed_items() -> None:
    done = pb.ITEM_STATUS_COMPLETED
    shell = bt.typed_call("shell", "call_1", '{"commands": ["ls", "pwd"], "timeout_ms": 0}', done)
    assert list(shell.shell_call.action.commands) == ["ls", "pwd"]
    assert not shell.shell_call.action.HasField("timeout_ms")  # 0 would stop it at once
    local = bt.typed_call(
        "local_shell", "c", '{"command": ["ls", "-l"], "working_directory": "/tmp"}', done
    )
    action = local.local_shell_call.action
    assert list(action.command) == ["ls", "-l"] and action.working_directory == "/tmp"
    # A call cut short keeps the commands it wrote whole, and says it is incomplete.
    cut = bt.typed_call("shell", "c", '{"commands": ["ls", "echo \\"a', pb.ITEM_STATUS_INCOMPLETE)
    assert list(cut.shell_call.action.commands) == ["ls"]
    assert cut.shell_call.status == pb.ITEM_STATUS_INCOMPLETE
    with pytest.raises(ValueError):
        bt.typed_call("shell", "c", '{"commands": ["ls"', done)
    with pytest.raises(ValueError):
        bt.typed_call("apply_patch", "c", CREATE[:30], pb.ITEM_STATUS_INCOMPLETE)


def _assembler() -> EventAssembler:
    counter = itertools.count()
    return EventAssembler(
        pb.Response(id="resp_1", status=pb.RESPONSE_STATUS_IN_PROGRESS),
        ids=lambda prefix: f"{prefix}_{next(counter)}",
        custom=["apply_patch"],
        builtin={"shell": "shell", "apply_patch": "apply_patch"},
    )


def _json(events: list[Any]) -> list[dict[str, Any]]:
    out = [event_to_json(e) for e in events]
    for event in out:  # every event in the OpenAI SDK's own shape
        TypeAdapter(ResponseStreamEvent).validate_python(event)
    return out


def _steps(events: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """(event type without `response.`, its command index / delta / command or item type)."""
    steps = []
    for e in events:
        name = e["type"].removeprefix("response.")
        if "item" in e:
            steps.append((name, (e["item"]["type"], e["item"]["status"])))
        else:
            steps.append((name, (e["command_index"], e.get("delta", e.get("command")))))
    return steps


def test_a_shell_call_is_added_at_once_and_its_commands_stream() -> None:
    a = _assembler()
    events = a.function_call_start("shell") + a.function_call_delta('{"commands": ["l')
    events += a.function_call_delta('s", "p')
    events += a.function_call_delta("w") + a.function_call_done('{"commands": ["ls", "pwd"]}')
    out = _json(events)
    assert _steps(out) == [
        ("output_item.added", ("shell_call", "in_progress")),
        ("shell_call_command.added", (0, "")),
        ("shell_call_command.delta", (0, "l")),
        ("shell_call_command.delta", (0, "s")),
        ("shell_call_command.done", (0, "ls")),
        ("shell_call_command.added", (1, "")),
        ("shell_call_command.delta", (1, "p")),
        ("shell_call_command.delta", (1, "w")),
        ("shell_call_command.delta", (1, "d")),
        ("shell_call_command.done", (1, "pwd")),
        ("output_item.done", ("shell_call", "completed")),
    ]
    added, done = out[0]["item"], out[-1]["item"]
    assert added["id"] == done["id"] and added["id"].startswith("sh_")
    assert added["call_id"] == done["call_id"] and done["action"]["commands"] == ["ls", "pwd"]
    assert a.response.output[0].shell_call.id == done["id"]
    assert {e["output_index"] for e in out} == {0}


def test_a_shell_call_that_does_not_parse_ends_incomplete_with_its_whole_commands() -> None:
    a = _assembler()
    events = a.function_call_start("shell") + a.function_call_delta('{"commands": ["ls", "p')
    events += a.function_call_done('{"commands": ["ls", "p')  # a call the span cut off
    out = _json(events)
    assert out[-1]["item"]["status"] == "incomplete"
    assert out[-1]["item"]["action"]["commands"] == ["ls"]


def test_a_patch_is_held_until_whole_then_added_and_done() -> None:
    a = _assembler()
    events = a.function_call_start("apply_patch") + a.function_call_delta(CREATE[:20])
    assert events == []  # nothing of the custom call it is shown as
    out = _json(a.function_call_delta(CREATE[20:]) + a.function_call_done(CREATE))
    assert _steps(out) == [
        ("output_item.added", ("apply_patch_call", "in_progress")),
        ("output_item.done", ("apply_patch_call", "completed")),
    ]
    assert out[0]["item"]["id"] == out[1]["item"]["id"] and out[0]["item"]["id"].startswith("apc_")
    assert a.response.output[0].apply_patch_call.operation.path == "src/hello.txt"


def test_a_cut_patch_stays_the_custom_call_the_model_wrote() -> None:
    a = _assembler()
    events = a.function_call("apply_patch", CREATE[:30], pb.ITEM_STATUS_INCOMPLETE)
    added, done = (event_to_json(e)["item"] for e in events)
    assert added["type"] == "custom_tool_call" and added["status"] == "in_progress"
    assert done["status"] == "incomplete" and done["input"] == CREATE[:30]


def test_typed_items_reach_the_model_as_function_and_custom_items() -> None:
    items = [
        item_from_json(
            {"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}}, "i"
        ),
        item_from_json(
            {
                "type": "shell_call_output",
                "call_id": "c1",
                "output": [
                    {
                        "stdout": "a\n",
                        "stderr": "oops",
                        "outcome": {"type": "exit", "exit_code": 2},
                    },
                    {"stdout": "", "stderr": "", "outcome": {"type": "timeout"}},
                ],
            },
            "i",
        ),
        item_from_json(
            {
                "type": "apply_patch_call",
                "call_id": "c2",
                "status": "completed",
                "operation": {"type": "delete_file", "path": "old.txt"},
            },
            "i",
        ),
        item_from_json(
            {"type": "apply_patch_call_output", "call_id": "c2", "status": "failed"}, "i"
        ),
        item_from_json(
            {"type": "local_shell_call", "call_id": "c3", "action": {"command": ["ls"]}}, "i"
        ),
        item_from_json({"type": "local_shell_call_output", "id": "c3", "output": "x"}, "i"),
    ]
    messages = items_to_messages(None, items)
    calls = [m for m in messages if m["role"] == "assistant"]
    names = [c["function"]["name"] for m in calls for c in m["tool_calls"]]
    assert names == ["shell", "apply_patch", "local_shell"]
    assert calls[0]["tool_calls"][0]["function"]["arguments"] == {"commands": ["ls"]}
    assert calls[1]["tool_calls"][0]["function"]["arguments"] == {"input": DELETE}
    outputs = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    assert outputs == [
        ("c1", "a\noops\n(exit code 2)\n(timed out)"),
        ("c2", "Failed"),
        ("c3", "x"),
    ]


ITEMS: list[dict[str, Any]] = [
    {
        "id": "sh_1",
        "type": "shell_call",
        "call_id": "c1",
        "status": "completed",
        "action": {"commands": ["ls"], "timeout_ms": 500, "max_output_length": None},
        "environment": None,
    },
    {
        "id": "sho_1",
        "type": "shell_call_output",
        "call_id": "c1",
        "status": "completed",
        "max_output_length": 100,
        "output": [{"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    {
        "id": "lsh_1",
        "type": "local_shell_call",
        "call_id": "c2",
        "status": "completed",
        "action": {
            "type": "exec",
            "command": ["ls"],
            "env": {"A": "1"},
            "timeout_ms": None,
            "user": None,
            "working_directory": "/tmp",
        },
    },
    {
        "id": "lsho_1",
        "type": "local_shell_call_output",
        "call_id": "c2",
        "status": "completed",
        "output": "x",
    },
    {
        "id": "apc_1",
        "type": "apply_patch_call",
        "call_id": "c3",
        "status": "completed",
        "operation": {"type": "update_file", "path": "a.py", "diff": "@@\n-a\n+b\n"},
    },
    {
        "id": "apco_1",
        "type": "apply_patch_call_output",
        "call_id": "c3",
        "status": "failed",
        "output": "no such file",
    },
]


@pytest.mark.parametrize("item", ITEMS, ids=[i["type"] for i in ITEMS])
def test_items_round_trip_in_the_sdk_shapes(item: dict[str, Any]) -> None:
    decoded = item_from_json(item, "input[0]")
    assert from_proto.builtin_item_to_json(decoded) == item
    TypeAdapter(ResponseInputItemParam).validate_python(item)
    parsed = TypeAdapter(ResponseOutputItem).validate_python(item)
    if item["type"] != "local_shell_call_output":  # an output item only from the SDK's side
        assert parsed.type == item["type"]


def test_tools_and_choices_decode_and_echo() -> None:
    body = {
        "model": "m",
        "input": "hi",
        "tools": [{"type": "shell", "environment": {"type": "local"}}, {"type": "apply_patch"}],
        "tool_choice": {"type": "apply_patch"},
    }
    params = params_from_json(body)
    assert [t.WhichOneof("tool") for t in params.tools] == ["shell", "apply_patch"]
    assert params.tool_choice.builtin_type == "apply_patch"
    allowed = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "shell"}]}
    assert list(
        params_from_json({**body, "tool_choice": allowed}).tool_choice.allowed_tools.names
    ) == ["shell"]
    with pytest.raises(OpenAIError) as caught:
        item_from_json(
            {"type": "apply_patch_call", "call_id": "c", "operation": {"path": "a"}}, "input[0]"
        )
    assert caught.value.param == "input[0].operation.type"


def test_lowering_shows_the_model_its_tools_and_forces_the_named_one() -> None:
    params = pb.CreateResponseParams(
        tools=[pb.Tool(shell=pb.ShellTool()), pb.Tool(apply_patch=pb.ApplyPatchTool())],
        tool_choice=pb.ToolChoice(builtin_type="apply_patch"),
    )
    lowered = lowering.lower(ResolvedTools(params))
    shell, patch = lowered.params.tools
    assert shell.function.name == "shell"
    assert json.loads(shell.function.parameters_json) == bt.SHELL_PARAMETERS
    assert patch.custom.name == "apply_patch"
    assert patch.custom.grammar.definition == bt.PATCH_GRAMMAR
    assert lowered.params.tool_choice.custom_name == "apply_patch"
    assert lowered.builtin == {"shell": "shell", "apply_patch": "apply_patch"}
    twice = pb.CreateResponseParams(
        tools=[pb.Tool(shell=pb.ShellTool()), pb.Tool(function=pb.FunctionTool(name="shell"))]
    )
    with pytest.raises(ServiceError, match="offered twice"):
        lowering.lower(ResolvedTools(twice))


@pytest.mark.parametrize(
    ("item", "param"),
    [
        (
            {
                "type": "shell_call",
                "call_id": "c",
                "action": {"commands": ["ls"], "timeout_ms": 2**70},
            },
            "input[0].action.timeout_ms",
        ),
        (
            {
                "type": "shell_call",
                "call_id": "c",
                "action": {"commands": ["ls"], "timeout_ms": -5},
            },
            "input[0].action.timeout_ms",
        ),
        (
            {
                "type": "shell_call_output",
                "call_id": "c",
                "output": [{"outcome": {"type": "exit", "exit_code": 2**40}}],
            },
            "input[0].output[0].outcome.exit_code",
        ),
        (
            {"type": "shell_call_output", "call_id": "c", "output": [], "max_output_length": 2**64},
            "input[0].max_output_length",
        ),
        (
            {"type": "local_shell_call", "call_id": "c", "action": {"command": ["ls"], "env": []}},
            "input[0].action.env",
        ),
        (
            {"type": "shell_call", "call_id": "c", "action": {"commands": "ls"}},
            "input[0].action.commands",
        ),
        ({"type": "local_shell_call_output", "output": "x"}, "input[0].id"),
        (
            {
                "type": "apply_patch_call",
                "call_id": "c",
                "operation": {"type": "create_file", "path": "a"},
            },
            "input[0].operation.diff",
        ),
        ({"type": "apply_patch_call_output", "call_id": "c", "status": "weird"}, "input[0].status"),
    ],
)
def test_malformed_items_are_400s_naming_the_field(item: dict[str, Any], param: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        item_from_json(item, "input[0]")
    assert caught.value.status == 400 and caught.value.param == param
