"""The client-run built-in tools `shell`, `local_shell` and `apply_patch`, as the model sees them.

The model calls `shell` and `local_shell` as function tools (JSON arguments under their
schemas) and `apply_patch` as a freeform tool whose input is a one-file V4A patch under the
grammar Codex's apply_patch uses (one hunk, no move: an `apply_patch_call` holds one
operation). This module converts both ways, purely: a generated call into its typed item
(`typed_call`), and a typed call or output in the history into the function or custom item the
prompt renders (`model_item`); and it reads a shell call's commands while they are written
(`partial_strings`, `CommandStream`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mlx_responses.service.text.json_scan import fixed_string_prefix, skip_blank, value_end

from mlx_responses.v1 import responses_pb2 as pb

SHELL = "shell"
LOCAL_SHELL = "local_shell"
APPLY_PATCH = "apply_patch"
BUILTIN_TOOLS = (SHELL, LOCAL_SHELL, APPLY_PATCH)
# The typed items, by kind: a call, or the client's output for one.
CALL_KINDS = ("shell_call", "local_shell_call", "apply_patch_call")
OUTPUT_KINDS = ("shell_call_output", "local_shell_call_output", "apply_patch_call_output")

SHELL_DESCRIPTION = (
    "Runs shell commands on the user's machine, in order, and returns what each printed and "
    "its exit code."
)
LOCAL_SHELL_DESCRIPTION = (
    "Runs one command on the user's machine and returns its output. `command` is the "
    'argument vector, e.g. ["ls", "-l"].'
)
APPLY_PATCH_DESCRIPTION = (
    "Creates, updates or deletes one file with a patch. This is a FREEFORM tool: do not wrap "
    "the patch in JSON. Write `*** Begin Patch`, then one of `*** Add File: <path>` (every "
    "line of the new file prefixed with +), `*** Delete File: <path>` or `*** Update File: "
    "<path>` (hunks of context lines prefixed with a space, removed lines with -, added lines "
    "with +, each hunk opened by @@), then `*** End Patch`."
)

SHELL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "commands": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "The shell commands to run, in order.",
        },
        "timeout_ms": {"type": "integer", "description": "How long they may run."},
    },
    "required": ["commands"],
    "additionalProperties": False,
}
LOCAL_SHELL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "The command and its arguments.",
        },
        "working_directory": {"type": "string", "description": "Where to run it."},
        "timeout_ms": {"type": "integer", "description": "How long it may run."},
    },
    "required": ["command"],
    "additionalProperties": False,
}

# Codex's apply_patch grammar (tests/fixtures/codex_0.169_apply_patch_tool.json) narrowed to
# what one apply_patch_call holds: one hunk, and no `*** Move to:` (an update has changes).
PATCH_GRAMMAR = r"""start: begin_patch hunk end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change

filename: /(.+)/
add_line: "+" /(.*)/ LF -> line

change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF

%import common.LF
"""

BEGIN_PATCH = "*** Begin Patch"
END_PATCH = "*** End Patch"
PATCH_HEADERS = {
    "*** Add File: ": pb.APPLY_PATCH_OPERATION_TYPE_CREATE_FILE,
    "*** Update File: ": pb.APPLY_PATCH_OPERATION_TYPE_UPDATE_FILE,
    "*** Delete File: ": pb.APPLY_PATCH_OPERATION_TYPE_DELETE_FILE,
}
_HEADER_OF = {kind: header for header, kind in PATCH_HEADERS.items()}
CALL_PREFIX = {"shell_call": "sh", "local_shell_call": "lsh", "apply_patch_call": "apc"}


def tool_kind(tool: pb.Tool) -> str | None:
    """`shell`, `local_shell` or `apply_patch` for a built-in client tool, else None."""
    kind = tool.WhichOneof("tool")
    return kind if kind in BUILTIN_TOOLS else None


# --- generated call -> typed item ------------------------------------------------------------
def parse_patch(text: str) -> pb.ApplyPatchOperation:
    """The one operation of a patch the grammar admits; ValueError for anything else."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 3 or lines[0] != BEGIN_PATCH or lines[-1] != END_PATCH:
        raise ValueError("not a whole patch")
    header, body = lines[1], lines[2:-1]
    for prefix, kind in PATCH_HEADERS.items():
        if header.startswith(prefix) and header[len(prefix) :]:
            operation = pb.ApplyPatchOperation(type=kind, path=header[len(prefix) :])
            if kind == pb.APPLY_PATCH_OPERATION_TYPE_DELETE_FILE:
                if body:
                    raise ValueError("a deleted file has no diff")
            elif body:
                operation.diff = "\n".join(body) + "\n"
            else:
                raise ValueError("a created or updated file needs a diff")
            return operation
    raise ValueError("not a file operation")


def _positive_int(arguments: dict[str, Any], key: str) -> int | None:
    """A positive integer argument (a timeout of 0 would stop a command before it runs)."""
    value = arguments.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected an array of strings")
    return list(value)


def partial_strings(payload: str, key: str) -> tuple[list[str], str | None]:
    """The strings of the array `key` in JSON that may be cut short: those written whole, and
    what the one still being written fixes so far (None when none is open)."""
    start = payload.find(json.dumps(key))
    pos = payload.find("[", start) if start >= 0 else -1
    strings: list[str] = []
    while pos >= 0:
        pos = skip_blank(payload, pos + 1)  # past `[` or `,`
        if pos >= len(payload) or payload[pos] != '"':
            break
        end = value_end(payload, pos)
        if end is None:
            return strings, fixed_string_prefix(payload[pos + 1 :])
        strings.append(json.loads(payload[pos:end]))
        pos = skip_blank(payload, end)
        if pos >= len(payload) or payload[pos] != ",":
            break
    return strings, None


def complete_strings(payload: str, key: str) -> list[str]:
    """The strings of the array `key` that were written whole in JSON cut short."""
    return partial_strings(payload, key)[0]


class CommandStream:
    """What of a shell call's commands has streamed: each as `added`, `delta`s, `done`."""

    def __init__(self) -> None:
        self.sent: list[str] = []  # the text sent of each command so far
        self.done = 0  # commands whose `done` was sent

    def update(self, whole: Sequence[str], current: str | None) -> list[tuple[str, int, str]]:
        """(`added` | `delta` | `done`, command index, text) for what is new: `whole` are the
        commands written whole, `current` the one still being written."""
        out: list[tuple[str, int, str]] = []
        texts = [*whole, *([] if current is None else [current])]
        for index in range(self.done, len(texts)):
            text = texts[index]
            if index == len(self.sent):
                out.append(("added", index, ""))
                self.sent.append("")
            sent = self.sent[index]
            if len(text) > len(sent) and text.startswith(sent):
                out.append(("delta", index, text[len(sent) :]))
                self.sent[index] = text
            if index < len(whole):
                out.append(("done", index, text))
                self.done = index + 1
        return out


def _arguments(payload: str, key: str, status: pb.ItemStatus) -> dict[str, Any]:
    """A shell call's arguments; a call cut short keeps the commands it wrote whole."""
    try:
        arguments = json.loads(payload)
    except ValueError:
        if status != pb.ITEM_STATUS_INCOMPLETE:
            raise
        return {key: complete_strings(payload, key)}
    if not isinstance(arguments, dict):
        raise ValueError("arguments are not an object")
    return arguments


def typed_call(kind: str, call_id: str, payload: str, status: pb.ItemStatus) -> pb.Item:
    """The typed call item of a generated call to built-in `kind` (id left to the caller).

    `payload` is the JSON arguments (shell tools) or the patch (apply_patch). A shell call cut
    short (`incomplete`) holds the commands it wrote whole; ValueError for any other call that
    does not read as its item (a patch cut short: an apply_patch_call cannot be incomplete).
    """
    item = pb.Item()
    if kind == APPLY_PATCH:
        operation = parse_patch(payload)
        patch_status = pb.ITEM_STATUS_COMPLETED  # an apply_patch_call is in_progress or completed
        item.apply_patch_call.CopyFrom(
            pb.ApplyPatchCallItem(call_id=call_id, operation=operation, status=patch_status)
        )
        return item
    arguments = _arguments(payload, "commands" if kind == SHELL else "command", status)
    timeout = _positive_int(arguments, "timeout_ms")
    if kind == SHELL:
        action = pb.ShellCallAction(commands=_strings(arguments.get("commands")))
        if timeout is not None:
            action.timeout_ms = timeout
        item.shell_call.CopyFrom(pb.ShellCallItem(call_id=call_id, action=action, status=status))
        return item
    exec_action = pb.LocalShellExecAction(command=_strings(arguments.get("command")))
    if timeout is not None:
        exec_action.timeout_ms = timeout
    workdir = arguments.get("working_directory")
    if isinstance(workdir, str):
        exec_action.working_directory = workdir
    item.local_shell_call.CopyFrom(
        pb.LocalShellCallItem(call_id=call_id, action=exec_action, status=status)
    )
    return item


# --- typed item -> what the model sees -------------------------------------------------------
def patch_text(operation: pb.ApplyPatchOperation) -> str:
    """The patch an apply_patch_call's operation stands for (the model's own input)."""
    header = _HEADER_OF.get(operation.type, "*** Update File: ")
    diff = operation.diff
    if diff and not diff.endswith("\n"):
        diff += "\n"
    return f"{BEGIN_PATCH}\n{header}{operation.path}\n{diff}{END_PATCH}\n"


def shell_output_text(output: pb.ShellCallOutputItem) -> str:
    """A shell_call_output as the model reads it: each command's output and how it ended."""
    blocks = []
    for entry in output.output:
        text = entry.stdout
        if entry.stderr:
            text += ("\n" if text and not text.endswith("\n") else "") + entry.stderr
        if entry.outcome.WhichOneof("outcome") == "timeout":
            ending = "(timed out)"
        else:
            ending = f"(exit code {entry.outcome.exit_code})"
        blocks.append(f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}{ending}")
    return "\n".join(blocks)


def model_item(item: pb.Item) -> pb.Item:
    """A typed built-in call or output as the function (custom) item the model knows; any other
    item as it is."""
    kind = item.WhichOneof("item")
    if kind == "shell_call":
        shell = item.shell_call
        arguments: dict[str, Any] = {"commands": list(shell.action.commands)}
        if shell.action.HasField("timeout_ms"):
            arguments["timeout_ms"] = shell.action.timeout_ms
        return _function_call(shell.call_id, SHELL, arguments)
    if kind == "local_shell_call":
        local = item.local_shell_call
        arguments = {"command": list(local.action.command)}
        if local.action.HasField("working_directory"):
            arguments["working_directory"] = local.action.working_directory
        if local.action.HasField("timeout_ms"):
            arguments["timeout_ms"] = local.action.timeout_ms
        return _function_call(local.call_id, LOCAL_SHELL, arguments)
    if kind == "apply_patch_call":
        patch = item.apply_patch_call
        custom = pb.CustomToolCallItem(
            call_id=patch.call_id, name=APPLY_PATCH, input=patch_text(patch.operation)
        )
        return pb.Item(custom_tool_call=custom)
    if kind == "shell_call_output":
        text = shell_output_text(item.shell_call_output)
        return _function_output(item.shell_call_output.call_id, text)
    if kind == "local_shell_call_output":
        out = item.local_shell_call_output
        return _function_output(out.call_id, out.output)
    if kind == "apply_patch_call_output":
        result = item.apply_patch_call_output
        failed = result.status == pb.APPLY_PATCH_OUTPUT_STATUS_FAILED
        text = result.output if result.HasField("output") else ("Failed" if failed else "Done")
        if failed and result.HasField("output"):
            text = f"Failed: {text}"
        output = pb.CustomToolCallOutputItem(call_id=result.call_id, output=text)
        return pb.Item(custom_tool_call_output=output)
    return item


def _function_call(call_id: str, name: str, arguments: dict[str, Any]) -> pb.Item:
    call = pb.FunctionCallItem(call_id=call_id, name=name, arguments=json.dumps(arguments))
    return pb.Item(function_call=call)


def _function_output(call_id: str, output: str) -> pb.Item:
    return pb.Item(function_call_output=pb.FunctionCallOutputItem(call_id=call_id, output=output))
