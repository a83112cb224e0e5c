"""JSON -> proto for the built-in client tools `shell`, `local_shell`, `apply_patch`: the tools,
their calls and the client's outputs, in the shapes of the OpenAI Python SDK's types
(`openai.types.responses`: FunctionShellTool, ResponseFunctionShellToolCall(Output),
LocalShellCall(Output), ResponseApplyPatchToolCall(Output)); from_proto.py encodes them."""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.kit.decode import proto_names
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.openapi import STRING, Schema, ts
from mlx_responses.http_facade.kit.shapes import Kind, Shape, array, field_shapes, mapping

from mlx_responses.v1 import responses_pb2 as pb

TOOL_TYPES = ("shell", "local_shell", "apply_patch")
ITEM_TYPES = (
    "shell_call",
    "shell_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
)
STATUS = proto_names(pb.ItemStatus, "in_progress", "completed", "incomplete")
OPERATIONS = proto_names(pb.ApplyPatchOperationType, "create_file", "update_file", "delete_file")
PATCH_OUTPUT = proto_names(pb.ApplyPatchOutputStatus, "completed", "failed")


def _typed(value: Any, kind: type | tuple[type, ...], param: str, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise invalid(f"Invalid type for '{param}': expected {what}.", param, "invalid_type")
    return value


def _str(obj: dict[str, Any], key: str, param: str, *, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise invalid(f"Missing required parameter: '{param}.{key}'.", f"{param}.{key}")
        return None
    text: str = _typed(value, str, f"{param}.{key}", "a string")
    return text


INT32 = (-(2**31), 2**31 - 1)
COUNTS = (0, 2**63 - 1)  # milliseconds and lengths: int64, not negative


def _integer(value: Any, param: str, bounds: tuple[int, int] = COUNTS) -> int:
    if isinstance(value, float) and value.is_integer():  # JSON's 2.0 is an integer
        value = int(value)
    number = int(_typed(value, int, param, "an integer"))
    if not bounds[0] <= number <= bounds[1]:
        raise invalid(
            f"Invalid '{param}': expected an integer from {bounds[0]} to {bounds[1]}.",
            param,
            "invalid_value",
        )
    return number


def _object(obj: dict[str, Any], key: str, param: str) -> dict[str, Any]:
    if obj.get(key) is None:
        raise invalid(f"Missing required parameter: '{param}.{key}'.", f"{param}.{key}")
    value: dict[str, Any] = _typed(obj[key], dict, f"{param}.{key}", "an object")
    return value


def _choice(table: dict[str, Any], value: Any, param: str, default: Any) -> Any:
    if value is None:
        return default
    if not isinstance(value, str) or value not in table:
        expected = ", ".join(table)
        raise invalid(f"Invalid '{param}': expected one of {expected}.", param, "invalid_value")
    return table[value]


def tool_from_json(tool: dict[str, Any], param: str) -> pb.Tool:
    """A `shell`, `local_shell` or `apply_patch` tool; a hosted shell (a container environment,
    run by OpenAI) is a hosted tool, refused or dropped as `--hosted-tools` says."""
    kind = tool["type"]
    if kind == "shell":
        environment = tool.get("environment")
        if environment is not None:
            _typed(environment, dict, f"{param}.environment", "an object")
            if environment.get("type", "local") != "local":
                return pb.Tool(hosted=pb.HostedTool(type="shell"))
        return pb.Tool(shell=pb.ShellTool())
    if kind == "local_shell":
        return pb.Tool(local_shell=pb.LocalShellTool())
    return pb.Tool(apply_patch=pb.ApplyPatchTool())


def _outcome(value: Any, param: str) -> pb.ShellCallOutcome:
    if value is None:
        return pb.ShellCallOutcome(exit_code=0)
    _typed(value, dict, param, "an object")
    if value.get("type") == "timeout":
        return pb.ShellCallOutcome(timeout=True)
    if value.get("type") != "exit":
        raise invalid(f"Invalid '{param}.type': expected exit or timeout.", f"{param}.type")
    code = value.get("exit_code")
    return pb.ShellCallOutcome(
        exit_code=0 if code is None else _integer(code, f"{param}.exit_code", INT32)
    )


def _kind(kind: type, what: str, schema: Schema) -> Kind:
    return Kind(schema, lambda value, param: _typed(value, kind, param, what), kind)


def _exec(value: Any, param: str) -> None:
    if value != "exec":
        raise invalid(f"Invalid '{param}': expected exec.", param, "invalid_value")


TEXT = _kind(str, "a string", STRING)
# Milliseconds and lengths: int64, not negative.
COUNT = Kind({"type": "integer", "minimum": COUNTS[0], "maximum": COUNTS[1]}, _integer)
STRINGS = array(TEXT, what="an array of strings", typed=_typed)
ITEM_STATUS = Kind({"enum": list(STATUS)}, lambda value, param: _choice(STATUS, value, param, 0))
# Absent or null: empty output, exit code 0.
OUTCOME = Kind(
    # an absent or null exit_code is 0
    ts(
        "{type: 'exit', exit_code?: C} | {type: 'timeout'} | null",
        C={"type": ["integer", "null"], "minimum": INT32[0], "maximum": INT32[1]},
    ),
    _outcome,
    container="message",
)
PATCH_STATUS = Kind(
    {"enum": [*PATCH_OUTPUT, None]},
    lambda value, param: (
        _choice(PATCH_OUTPUT, value, param, None) or pb.APPLY_PATCH_OUTPUT_STATUS_COMPLETED
    ),
)
# Their kinds, in this module's own wording (`text` a string, `_typed`'s refusals).
KINDS = {"text": TEXT, "COUNT": COUNT, "STRINGS": STRINGS, "STATUS": ITEM_STATUS}
KINDS["OUTCOME"], KINDS["PATCH"] = OUTCOME, PATCH_STATUS
KINDS["ENV"], KINDS["EXEC"] = mapping(TEXT, typed=_typed), Kind({"enum": ["exec"]}, _exec)
ENTRY = Shape(
    None,
    pb.ShellCallOutputContent,
    "stdout?: text, stderr?: text, outcome!: OUTCOME = null",
    **KINDS,
)
SHELL = Shape(
    None,
    pb.ShellCallAction,
    "commands!: STRINGS, timeout_ms?: COUNT, max_output_length?: COUNT",
    **KINDS,
)
EXEC = Shape(
    None,
    pb.LocalShellExecAction,
    "type?: EXEC -> _, command!: STRINGS, env?: ENV, timeout_ms?: COUNT, user?: text,"
    " working_directory?: text",
    **KINDS,
)
KINDS["SHELL"], KINDS["EXEC"] = SHELL.nested(_typed), EXEC.nested(_typed)
KINDS["ENTRIES"] = array(ENTRY.nested(_typed), typed=_typed)
CALL = "id?: text, call_id: text"
# The items whose fields are declared, by type (the Item field each fills).
SHAPES_DECLARED = {
    "shell_call": f"action: SHELL, {CALL}, status?: STATUS",
    "shell_call_output": f"{CALL}, status?: STATUS, output!: ENTRIES, max_output_length?: COUNT",
    "local_shell_call": f"action: EXEC, {CALL}, status?: STATUS",
    "apply_patch_call_output": f"{CALL}, status!: PATCH = null, output?: text",
}
SHAPES = field_shapes(pb.Item, SHAPES_DECLARED, **KINDS)


def _apply_patch_call(item: dict[str, Any], param: str) -> pb.ApplyPatchCallItem:
    operation = _object(item, "operation", param)
    where = f"{param}.operation"
    op = pb.ApplyPatchOperation(
        type=_choice(OPERATIONS, operation.get("type"), f"{where}.type", None),
        path=_str(operation, "path", where, required=True),
    )
    if op.type == pb.APPLY_PATCH_OPERATION_TYPE_UNSPECIFIED:
        raise invalid(f"Missing required parameter: '{where}.type'.", f"{where}.type")
    diff = _str(operation, "diff", where, required=op.type != OPERATIONS["delete_file"])
    if diff is not None:
        op.diff = diff
    return pb.ApplyPatchCallItem(
        id=_str(item, "id", param) or "",
        call_id=_str(item, "call_id", param, required=True),
        operation=op,
        status=_choice(STATUS, item.get("status"), f"{param}.status", 0),
    )


def item_from_json(item: dict[str, Any], param: str) -> pb.Item:
    """One of ITEM_TYPES as an input item."""
    kind = item["type"]
    shape = SHAPES.get(kind)
    if shape is not None:
        return shape.build_in(pb.Item, kind, item, param)  # type: ignore[no-any-return]
    if kind == "local_shell_call_output":
        # OpenAI names the call by `id`; the Agents SDK sends `call_id`.
        call_id = _str(item, "call_id", param)
        item_id = _str(item, "id", param, required=call_id is None) or ""
        out = pb.LocalShellCallOutputItem(
            id=item_id if call_id is not None else "",
            call_id=call_id if call_id is not None else item_id,
            output=_str(item, "output", param, required=True),
            status=_choice(STATUS, item.get("status"), f"{param}.status", 0),
        )
        return pb.Item(local_shell_call_output=out)
    return pb.Item(apply_patch_call=_apply_patch_call(item, param))


def item_schemas() -> list[Schema]:
    """The OpenAPI schemas of ITEM_TYPES (input and output items alike)."""
    shapes = {kind: shape.schema() for kind, shape in SHAPES.items()}
    names: dict[str, Schema] = {
        "S": {"enum": [*STATUS, None]},
        "ID": {"anyOf": [_named("call_id"), _named("id")]},
    }
    local = ts(
        "{type: 'local_shell_call_output', id?: string|null, call_id?: string|null,"
        " output: string, status?: S}",
        **names,
    )
    # A V4A diff for a file created or updated; a deletion needs none.
    patch = ts(
        "{type: 'apply_patch_call', id?: string|null, call_id: string, status?: S, operation:"
        " {type: 'create_file' | 'update_file', path: string, diff: string}"
        " | {type: 'delete_file', path: string, diff?: string|null}}",
        **names,
    )
    return [
        shapes["shell_call"],
        shapes["shell_call_output"],
        shapes["local_shell_call"],
        {**local, **names["ID"], "description": "`id` names the call when `call_id` is absent."},
        patch,
        shapes["apply_patch_call_output"],
    ]


def _named(key: str) -> Schema:
    return {"required": [key], "properties": {key: STRING}}
