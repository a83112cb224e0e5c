"""Tools and tool_choice as the OpenAI dialects send them: function tools (nested under
`function`, Chat's shape, or flat, Responses'), and a tool_choice mode, name or allowed list."""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.kit.decode import expect, one_of, proto_names, required_str
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.openapi import Schema, ts
from mlx_responses.http_facade.kit.shapes import Shape

from mlx_responses.v1 import responses_pb2 as pb

TOOL_CHOICE_MODES = proto_names(pb.ToolChoiceMode, "none", "auto", "required")
# Client-run built-in tools (Responses' shell, local_shell, apply_patch): a tool_choice may
# name one by its type.
BUILTIN_TOOL_TYPES = ("shell", "local_shell", "apply_patch")


# A function tool's fields (beside `type`, or under `function`).
FUNCTION = Shape(
    None,
    pb.FunctionTool,
    "name: text, description?: text, parameters?: json -> parameters_json, strict?: flag",
)


def function_tool(tool: dict[str, Any], param: str) -> pb.Tool:
    """A function tool: its fields under `function`, or beside `type`."""
    spec = tool
    if tool.get("function") is not None:
        spec = expect(tool["function"], dict, f"{param}.function", "an object")
    return FUNCTION.build_in(pb.Tool, "function", spec, param)  # type: ignore[no-any-return]


def tool_choice(value: Any) -> pb.ToolChoice:
    """A mode (`auto`, ...), a named function or custom tool, a built-in type, or allowed_tools."""
    if isinstance(value, str):
        if value not in TOOL_CHOICE_MODES:
            raise invalid(
                f"Invalid 'tool_choice' {value!r}: expected none, auto or required.",
                "tool_choice",
                "invalid_value",
            )
        return pb.ToolChoice(mode=TOOL_CHOICE_MODES[value])
    expect(value, dict, "tool_choice", "a string or an object")
    if value.get("type") == "function":
        name = value.get("name")
        if name is None and isinstance(value.get("function"), dict):
            name = value["function"].get("name")
        return pb.ToolChoice(function_name=expect(name, str, "tool_choice.name", "a string"))
    if value.get("type") == "custom":
        name = value.get("name")
        return pb.ToolChoice(custom_name=expect(name, str, "tool_choice.name", "a string"))
    if value.get("type") == "allowed_tools":
        return pb.ToolChoice(allowed_tools=_allowed_tools(value))
    if one_of(set(BUILTIN_TOOL_TYPES), value.get("type")):
        return pb.ToolChoice(builtin_type=value["type"])
    raise invalid(
        f"Unsupported tool_choice type {value.get('type')!r}: "
        "only function and custom tools exist here.",
        "tool_choice",
        "unsupported_tool",
    )


def _allowed_tools(value: dict[str, Any]) -> pb.AllowedTools:
    mode = value.get("mode", "auto")
    if mode not in ("auto", "required"):
        raise invalid(
            f"Invalid 'tool_choice.mode' {mode!r}: expected auto or required.",
            "tool_choice.mode",
            "invalid_value",
        )
    tools = expect(value.get("tools"), list, "tool_choice.tools", "an array")
    names = []
    for i, tool in enumerate(tools):
        param = f"tool_choice.tools[{i}]"
        expect(tool, dict, param, "an object")
        if one_of(set(BUILTIN_TOOL_TYPES), tool.get("type")):
            names.append(tool["type"])  # a built-in tool is called by its type
            continue
        if tool.get("type") not in ("function", "custom"):
            raise invalid(
                f"Unsupported allowed tool type {tool.get('type')!r}: "
                "only function and custom tools exist.",
                f"{param}.type",
                "unsupported_tool",
            )
        names.append(required_str(tool, "name", param))
    return pb.AllowedTools(mode=TOOL_CHOICE_MODES[mode], names=names)


def function_tool_schema(type_required: bool = False) -> Schema:
    """A function tool as `function_tool` takes it: nested under `function`, or flat
    (Responses' shape).

    Chat's `type` defaults to function; Responses requires it.
    """
    kind = "" if type_required else "?"
    nested = ts(f"{{type{kind}: 'function', function: F}}", F=FUNCTION.schema())
    flat = FUNCTION.schema(type={"const": "function"}, function={"type": "null"})
    return {"anyOf": [nested, {**flat, "required": [*nested["required"][:-1], *flat["required"]]}]}


def tool_choice_schema() -> Schema:
    """What `tool_choice` takes."""
    return ts(
        "MODES | {type: 'function' | 'custom', name: string}"
        " | {type: 'function', name?: null, function: {name: string}}"
        " | {type: 'allowed_tools', mode?: 'auto' | 'required',"
        " tools: {type: 'function' | 'custom', name: string}[]}",
        MODES={"enum": sorted(TOOL_CHOICE_MODES)},
    )
