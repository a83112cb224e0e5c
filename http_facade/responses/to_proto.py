"""Decodes OpenAI Responses JSON (responses/protocol.py declares it) into core proto messages;
bad shapes are refused with a param. The structured parts (items, tools, text) by hand."""

from __future__ import annotations

import json
from typing import Any

from mlx_responses.http_facade.kit.cache_hints import check_breakpoint, input_breakpoints, lifetimes
from mlx_responses.http_facade.kit.decode import expect, one_of, required_str
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.fields import fill_shaped
from mlx_responses.http_facade.kit.keep_alive import read_keep_alive
from mlx_responses.http_facade.kit.tools import function_tool, tool_choice
from mlx_responses.http_facade.responses import builtin_items
from mlx_responses.http_facade.responses.media_parts import file_part, image_part
from mlx_responses.http_facade.responses.protocol import (
    CUSTOM_TOOL,
    FIELDS,
    HOSTED_TOOLS,
    ITEMS,
    MEDIA_PARTS,
    MESSAGE,
    NAMESPACE,
    STATUS,
)

from mlx_responses.v1 import responses_pb2 as pb

BUILTIN_ITEMS = frozenset(builtin_items.ITEM_TYPES)
BUILTIN_TOOLS = frozenset(builtin_items.TOOL_TYPES)
# The plain scalar parameters (a test sends each one a list).
SCALAR_PARAMS = tuple(
    f.name for f in FIELDS if f.type in ("string", "boolean", "integer", "number")
)


def _text_parts(content: Any, param: str, role: int) -> list[pb.ContentPart]:
    if isinstance(content, str):
        if role == pb.ROLE_ASSISTANT:
            return [pb.ContentPart(output_text=pb.OutputText(text=content))]
        return [pb.ContentPart(input_text=pb.InputText(text=content))]
    expect(content, list, param, "a string or an array of content parts")
    parts = []
    for i, part in enumerate(content):
        where = f"{param}[{i}]"
        expect(part, dict, where, "an object")
        check_breakpoint(part.get("prompt_cache_breakpoint"), f"{where}.prompt_cache_breakpoint")
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            text = expect(part.get("text"), str, f"{where}.text", "a string")
            if kind == "output_text" or (kind == "text" and role == pb.ROLE_ASSISTANT):
                parts.append(pb.ContentPart(output_text=pb.OutputText(text=text)))
            else:
                parts.append(pb.ContentPart(input_text=pb.InputText(text=text)))
        elif kind == "refusal":
            refusal = expect(part.get("refusal"), str, f"{where}.refusal", "a string")
            parts.append(pb.ContentPart(refusal=pb.Refusal(refusal=refusal)))
        elif kind == "input_image":
            parts.append(image_part(part, where))
        elif kind == "input_file":
            parts.append(file_part(part, where))
        elif one_of(MEDIA_PARTS, kind):
            # The core refuses it (seed) or puts a placeholder in its place (`--media drop`).
            parts.append(pb.ContentPart(media=pb.MediaPart(type=kind)))
        else:
            raise invalid(f"Unknown content part type {kind!r}.", f"{where}.type", "invalid_value")
    return parts


def _message(item: dict[str, Any], param: str) -> pb.Item:
    result = pb.Item()
    message = result.message
    MESSAGE.fill(message, item, param)
    if "content" not in item:
        raise invalid("Missing required parameter: 'content'.", f"{param}.content")
    message.content.extend(_text_parts(item["content"], f"{param}.content", message.role))
    return result


def item_from_json(item: Any, param: str) -> pb.Item:
    """One input item (message, function_call, function_call_output, reasoning, compaction)."""
    expect(item, dict, param, "an object")
    kind = item.get("type")
    if (kind is None and "role" in item) or kind == "message":
        return _message(item, param)
    if kind == "item_reference" or (kind is None and "id" in item):
        # Resolved by the core against the history and the stored responses.
        return pb.Item(item_reference=pb.ItemReference(id=required_str(item, "id", param)))
    if one_of(BUILTIN_ITEMS, kind):  # their statuses are their own
        return builtin_items.item_from_json(item, param)
    shape = ITEMS.get(kind) if isinstance(kind, str) else None
    if shape is not None:
        return shape.build_in(pb.Item, kind, item, param)  # type: ignore[no-any-return]
    if item.get("status") is not None:  # checked before the type, as for every item
        STATUS.check(item["status"], f"{param}.status")  # type: ignore[misc]
    raise invalid(f"Unknown input item type {kind!r}.", f"{param}.type", "invalid_value")


def _input(value: Any) -> list[pb.Item]:
    if isinstance(value, str):
        if not value:
            raise invalid("'input' must not be empty.", "input", "empty_input")
        return [
            pb.Item(
                message=pb.MessageItem(
                    role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text=value))]
                )
            )
        ]
    expect(value, list, "input", "a string or an array of items")
    return [item_from_json(item, f"input[{i}]") for i, item in enumerate(value)]


def _namespace(tool: dict[str, Any], param: str) -> pb.Tool:
    result = pb.Tool()
    NAMESPACE.fill(result.namespace, tool, param)
    inner = expect(tool.get("tools"), list, f"{param}.tools", "an array")
    for i, entry in enumerate(inner):
        where = f"{param}.tools[{i}]"
        if isinstance(entry, dict) and entry.get("type") == "namespace":
            raise invalid("Namespaces do not nest.", f"{where}.type", "invalid_value")
        result.namespace.tools.append(_tool(entry, where))
    return result


def _tool(tool: Any, param: str) -> pb.Tool:
    expect(tool, dict, param, "an object")
    kind = tool.get("type")
    if one_of(HOSTED_TOOLS, kind):
        return pb.Tool(hosted=pb.HostedTool(type=kind))
    if one_of(BUILTIN_TOOLS, kind):
        return builtin_items.tool_from_json(tool, param)
    if kind == "namespace":
        return _namespace(tool, param)
    if kind == "custom":
        return CUSTOM_TOOL.build_in(pb.Tool, "custom", tool, param)  # type: ignore[no-any-return]
    if kind != "function":
        raise invalid(f"Unknown tool type {kind!r}.", f"{param}.type", "invalid_value")
    return function_tool(tool, param)


def params_from_json(body: Any) -> pb.CreateResponseParams:
    """A create (or input_tokens / compact) body as CreateResponseParams.

    Unknown fields are ignored: real clients send fields this server does not act on.
    """
    params = pb.CreateResponseParams()
    body, values = FIELDS.decode(body, params)
    params.input.extend(_input(body["input"]))
    params.cache_breakpoints.extend(input_breakpoints(body["input"]))
    lifetimes(body, params)
    if body.get("tools") is not None:
        tools = expect(body["tools"], list, "tools", "an array")
        params.tools.extend(_tool(t, f"tools[{i}]") for i, t in enumerate(tools))
    if body.get("tool_choice") is not None:
        params.tool_choice.CopyFrom(tool_choice(body["tool_choice"]))
    fill_shaped(FIELDS, values, params)
    if values.get("chat_template_kwargs") is not None:
        params.chat_template_kwargs_json = json.dumps(values.get("chat_template_kwargs"))
    read_keep_alive(body, params)
    return params
