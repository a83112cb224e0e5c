"""Decodes OpenAI Responses JSON into core proto messages; bad shapes are refused with a param."""

from __future__ import annotations

import json
from typing import Any

from mlx_responses.http_facade import builtin_items
from mlx_responses.http_facade.cache_hints import check_breakpoint, input_breakpoints, lifetimes
from mlx_responses.http_facade.errors import invalid
from mlx_responses.http_facade.keep_alive import read_keep_alive
from mlx_responses.http_facade.media_parts import file_part, image_part

from mlx_responses.v1 import responses_pb2 as pb

ROLES = {
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "system": pb.ROLE_SYSTEM,
    "developer": pb.ROLE_DEVELOPER,
}
ITEM_STATUS = {
    "in_progress": pb.ITEM_STATUS_IN_PROGRESS,
    "completed": pb.ITEM_STATUS_COMPLETED,
    "incomplete": pb.ITEM_STATUS_INCOMPLETE,
}
TOOL_CHOICE_MODES = {
    "none": pb.TOOL_CHOICE_MODE_NONE,
    "auto": pb.TOOL_CHOICE_MODE_AUTO,
    "required": pb.TOOL_CHOICE_MODE_REQUIRED,
}
# Hosted tools need services this server does not run: the core refuses them (seed) or drops
# them (`--hosted-tools drop`); any other unknown type is a 400 here.
HOSTED_TOOLS = {
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
    "file_search",
    "computer",
    "computer_use",
    "computer_use_preview",
    "code_interpreter",
    "image_generation",
    "mcp",
    "function_shell",
    "tool_search",
}
MEDIA_PARTS = {"input_audio"}  # input_image and input_file reach the core (media_parts.py)
NUMBER = (int, float)
# Top-level scalar parameters and the JSON type each accepts (the OpenAPI document reads this).
SCALAR_PARAMS: dict[str, type | tuple[type, ...]] = {
    "model": str,
    "instructions": str,
    "user": str,
    "safety_identifier": str,
    "prompt_cache_key": str,
    "service_tier": str,
    "previous_response_id": str,
    "truncation": str,
    "store": bool,
    "parallel_tool_calls": bool,
    "stream": bool,
    "background": bool,
    "max_output_tokens": int,
    "top_logprobs": int,
    "temperature": NUMBER,
    "top_p": NUMBER,
    "presence_penalty": NUMBER,
    "frequency_penalty": NUMBER,
}
REQUIRED_PARAMS = ("model", "input")
EXPECTED = {str: "a string", bool: "a boolean", int: "an integer", NUMBER: "a number"}


INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
# Integer parameters narrower than int64 in the proto.
INT_LIMITS = {"top_logprobs": INT32_MAX}


def _lookup(table: dict[str, Any], value: Any) -> Any:
    """`table[value]` for a string key, else None (a list or object is never a key)."""
    return table.get(value) if isinstance(value, str) else None


def _in(names: set[str], value: Any) -> bool:
    return isinstance(value, str) and value in names


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _expect(value: Any, kind: type | tuple[type, ...], param: str, what: str) -> Any:
    is_bool = isinstance(value, bool)
    numeric = kind in (int, float, (int, float))
    if not isinstance(value, kind) or (numeric and is_bool):
        raise invalid(
            f"Invalid type for '{param}': expected {what}, but got {_type_name(value)}.",
            param,
            "invalid_type",
        )
    return value


def _text_parts(content: Any, param: str, role: int) -> list[pb.ContentPart]:
    if isinstance(content, str):
        if role == pb.ROLE_ASSISTANT:
            return [pb.ContentPart(output_text=pb.OutputText(text=content))]
        return [pb.ContentPart(input_text=pb.InputText(text=content))]
    _expect(content, list, param, "a string or an array of content parts")
    parts = []
    for i, part in enumerate(content):
        where = f"{param}[{i}]"
        _expect(part, dict, where, "an object")
        check_breakpoint(part.get("prompt_cache_breakpoint"), f"{where}.prompt_cache_breakpoint")
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            text = _expect(part.get("text"), str, f"{where}.text", "a string")
            if kind == "output_text" or (kind == "text" and role == pb.ROLE_ASSISTANT):
                parts.append(pb.ContentPart(output_text=pb.OutputText(text=text)))
            else:
                parts.append(pb.ContentPart(input_text=pb.InputText(text=text)))
        elif kind == "refusal":
            refusal = _expect(part.get("refusal"), str, f"{where}.refusal", "a string")
            parts.append(pb.ContentPart(refusal=pb.Refusal(refusal=refusal)))
        elif kind == "input_image":
            parts.append(image_part(part, where))
        elif kind == "input_file":
            parts.append(file_part(part, where))
        elif _in(MEDIA_PARTS, kind):
            # The core refuses it (seed) or puts a placeholder in its place (`--media drop`).
            parts.append(pb.ContentPart(media=pb.MediaPart(type=kind)))
        else:
            raise invalid(f"Unknown content part type {kind!r}.", f"{where}.type", "invalid_value")
    return parts


def _message(item: dict[str, Any], param: str) -> pb.Item:
    role_name = item.get("role")
    role = _lookup(ROLES, role_name)
    if role is None:
        raise invalid(
            f"Invalid 'role' {role_name!r}: expected one of user, assistant, system, developer.",
            f"{param}.role",
            "invalid_value",
        )
    if "content" not in item:
        raise invalid("Missing required parameter: 'content'.", f"{param}.content")
    message = pb.MessageItem(
        id=_optional_str(item, "id", param) or "",
        role=role,
        content=_text_parts(item["content"], f"{param}.content", role),
    )
    message.status = _status(item, param)
    return pb.Item(message=message)


def _status(item: dict[str, Any], param: str) -> pb.ItemStatus:
    """An item's optional `status`: one of ITEM_STATUS, or null."""
    value = item.get("status")
    if value is None:
        return pb.ITEM_STATUS_UNSPECIFIED
    status = _lookup(ITEM_STATUS, value)
    if status is None:
        raise invalid(
            f"Invalid 'status' {value!r}: expected one of {', '.join(ITEM_STATUS)}.",
            f"{param}.status",
            "invalid_value",
        )
    return status  # type: ignore[no-any-return]


def _optional_list(obj: dict[str, Any], key: str, param: str) -> list[Any]:
    """An optional array: null or absent is empty."""
    value = obj.get(key)
    if value is None:
        return []
    return list(_expect(value, list, f"{param}.{key}", "an array"))


def _optional_str(obj: dict[str, Any], key: str, param: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    return _expect(value, str, f"{param}.{key}", "a string")


def _required_str(obj: dict[str, Any], key: str, param: str) -> str:
    if obj.get(key) is None:
        raise invalid(f"Missing required parameter: '{param}.{key}'.", f"{param}.{key}")
    return _expect(obj[key], str, f"{param}.{key}", "a string")


def _output_text(output: Any, param: str) -> str:
    """A tool output: a string, or the text parts of a structured output."""
    if isinstance(output, list):
        output = "".join(
            _expect(p.get("text", ""), str, f"{param}.output[{i}].text", "a string")
            for i, p in enumerate(output)
            if isinstance(p, dict)
        )
    text: str = _expect(output, str, f"{param}.output", "a string")
    return text


def item_from_json(item: Any, param: str) -> pb.Item:
    """One input item (message, function_call, function_call_output, reasoning, compaction)."""
    _expect(item, dict, param, "an object")
    kind = item.get("type")
    if (kind is None and "role" in item) or kind == "message":
        return _message(item, param)
    if kind == "item_reference" or (kind is None and "id" in item):
        # Resolved by the core against the history and the stored responses.
        return pb.Item(item_reference=pb.ItemReference(id=_required_str(item, "id", param)))
    if _in(set(builtin_items.ITEM_TYPES), kind):  # their statuses are their own
        return builtin_items.item_from_json(item, param)
    status = _status(item, param)
    if kind == "function_call":
        arguments = item.get("arguments", "")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        call = pb.Item(
            function_call=pb.FunctionCallItem(
                id=_optional_str(item, "id", param) or "",
                call_id=_required_str(item, "call_id", param),
                name=_required_str(item, "name", param),
                arguments=_expect(arguments, str, f"{param}.arguments", "a string"),
                status=status,
            )
        )
        namespace = _optional_str(item, "namespace", param)
        if namespace is not None:
            call.function_call.namespace = namespace
        return call
    if kind == "function_call_output":
        return pb.Item(
            function_call_output=pb.FunctionCallOutputItem(
                id=_optional_str(item, "id", param) or "",
                call_id=_required_str(item, "call_id", param),
                output=_output_text(item.get("output"), param),
                status=status,
            )
        )
    if kind == "reasoning":
        reasoning = pb.ReasoningItem(id=_optional_str(item, "id", param) or "", status=status)
        content = _optional_list(item, "content", param)
        summary = _optional_list(item, "summary", param)
        for i, part in enumerate(content):
            _expect(part, dict, f"{param}.content[{i}]", "an object")
            reasoning.content.append(pb.ReasoningText(text=str(part.get("text", ""))))
        for i, part in enumerate(summary):
            _expect(part, dict, f"{param}.summary[{i}]", "an object")
            reasoning.summary.append(pb.SummaryText(text=str(part.get("text", ""))))
        encrypted = _optional_str(item, "encrypted_content", param)
        if encrypted is not None:
            reasoning.encrypted_content = encrypted
        return pb.Item(reasoning=reasoning)
    if kind == "custom_tool_call":
        custom = pb.CustomToolCallItem(
            id=_optional_str(item, "id", param) or "",
            call_id=_required_str(item, "call_id", param),
            name=_required_str(item, "name", param),
            input=_expect(item.get("input", ""), str, f"{param}.input", "a string"),
            status=status,
        )
        namespace = _optional_str(item, "namespace", param)
        if namespace is not None:
            custom.namespace = namespace
        return pb.Item(custom_tool_call=custom)
    if kind == "custom_tool_call_output":
        return pb.Item(
            custom_tool_call_output=pb.CustomToolCallOutputItem(
                id=_optional_str(item, "id", param) or "",
                call_id=_required_str(item, "call_id", param),
                output=_output_text(item.get("output"), param),
                status=status,
            )
        )
    if kind == "compaction_trigger":
        return pb.Item(compaction_trigger=pb.CompactionTriggerItem())
    if kind == "compaction":
        return pb.Item(
            compaction=pb.CompactionItem(
                id=_optional_str(item, "id", param) or "",
                encrypted_content=_required_str(item, "encrypted_content", param),
            )
        )
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
    _expect(value, list, "input", "a string or an array of items")
    return [item_from_json(item, f"input[{i}]") for i, item in enumerate(value)]


def _namespace(tool: dict[str, Any], param: str) -> pb.Tool:
    namespace = pb.NamespaceTool(name=_required_str(tool, "name", param))
    description = _optional_str(tool, "description", param)
    if description is not None:
        namespace.description = description
    inner = _expect(tool.get("tools"), list, f"{param}.tools", "an array")
    for i, entry in enumerate(inner):
        where = f"{param}.tools[{i}]"
        if isinstance(entry, dict) and entry.get("type") == "namespace":
            raise invalid("Namespaces do not nest.", f"{where}.type", "invalid_value")
        namespace.tools.append(_tool(entry, where))
    return pb.Tool(namespace=namespace)


def _tool(tool: Any, param: str) -> pb.Tool:
    _expect(tool, dict, param, "an object")
    kind = tool.get("type")
    if _in(HOSTED_TOOLS, kind):
        return pb.Tool(hosted=pb.HostedTool(type=kind))
    if _in(set(builtin_items.TOOL_TYPES), kind):
        return builtin_items.tool_from_json(tool, param)
    if kind == "namespace":
        return _namespace(tool, param)
    if kind == "custom":
        return _custom_tool(tool, param)
    if kind != "function":
        raise invalid(f"Unknown tool type {kind!r}.", f"{param}.type", "invalid_value")
    spec = tool
    if tool.get("function") is not None:
        spec = _expect(tool["function"], dict, f"{param}.function", "an object")
    fn = pb.FunctionTool(name=_required_str(spec, "name", param))
    description = _optional_str(spec, "description", param)
    if description is not None:
        fn.description = description
    parameters = spec.get("parameters")
    if parameters is not None:
        _expect(parameters, dict, f"{param}.parameters", "an object")
        fn.parameters_json = json.dumps(parameters)
    if spec.get("strict") is not None:
        fn.strict = _expect(spec["strict"], bool, f"{param}.strict", "a boolean")
    return pb.Tool(function=fn)


def _custom_tool(tool: dict[str, Any], param: str) -> pb.Tool:
    custom = pb.CustomTool(name=_required_str(tool, "name", param))
    description = _optional_str(tool, "description", param)
    if description is not None:
        custom.description = description
    fmt = tool.get("format")
    if fmt is None:
        return pb.Tool(custom=custom)
    _expect(fmt, dict, f"{param}.format", "an object")
    kind = fmt.get("type")
    if kind == "text":
        custom.text.SetInParent()
    elif kind == "grammar":
        syntax = _required_str(fmt, "syntax", f"{param}.format")
        if syntax not in ("lark", "regex"):
            raise invalid(
                f"Invalid 'syntax' {syntax!r}: expected lark or regex.",
                f"{param}.format.syntax",
                "invalid_value",
            )
        definition = _required_str(fmt, "definition", f"{param}.format")
        custom.grammar.CopyFrom(pb.CustomToolGrammar(syntax=syntax, definition=definition))
    else:
        raise invalid(
            f"Unknown custom tool format type {kind!r}: expected text or grammar.",
            f"{param}.format.type",
            "invalid_value",
        )
    return pb.Tool(custom=custom)


def _tool_choice(value: Any) -> pb.ToolChoice:
    if isinstance(value, str):
        if value not in TOOL_CHOICE_MODES:
            raise invalid(
                f"Invalid 'tool_choice' {value!r}: expected none, auto or required.",
                "tool_choice",
                "invalid_value",
            )
        return pb.ToolChoice(mode=TOOL_CHOICE_MODES[value])
    _expect(value, dict, "tool_choice", "a string or an object")
    if value.get("type") == "function":
        name = value.get("name")
        if name is None and isinstance(value.get("function"), dict):
            name = value["function"].get("name")
        return pb.ToolChoice(function_name=_expect(name, str, "tool_choice.name", "a string"))
    if value.get("type") == "custom":
        name = value.get("name")
        return pb.ToolChoice(custom_name=_expect(name, str, "tool_choice.name", "a string"))
    if value.get("type") == "allowed_tools":
        return pb.ToolChoice(allowed_tools=_allowed_tools(value))
    if _in(set(builtin_items.TOOL_TYPES), value.get("type")):
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
    tools = _expect(value.get("tools"), list, "tool_choice.tools", "an array")
    names = []
    for i, tool in enumerate(tools):
        param = f"tool_choice.tools[{i}]"
        _expect(tool, dict, param, "an object")
        if _in(set(builtin_items.TOOL_TYPES), tool.get("type")):
            names.append(tool["type"])  # a built-in tool is called by its type
            continue
        if tool.get("type") not in ("function", "custom"):
            raise invalid(
                f"Unsupported allowed tool type {tool.get('type')!r}: "
                "only function and custom tools exist.",
                f"{param}.type",
                "unsupported_tool",
            )
        names.append(_required_str(tool, "name", param))
    return pb.AllowedTools(mode=TOOL_CHOICE_MODES[mode], names=names)


def _text(value: Any) -> pb.TextConfig:
    _expect(value, dict, "text", "an object")
    config = pb.TextConfig()
    fmt = value.get("format")
    if fmt is not None:
        _expect(fmt, dict, "text.format", "an object")
        kind = fmt.get("type")
        if kind == "text":
            config.text.SetInParent()
        elif kind == "json_object":
            config.json_object.SetInParent()
        elif kind == "json_schema":
            schema = fmt.get("schema")
            _expect(schema, dict, "text.format.schema", "an object")
            js = pb.TextFormatJsonSchema(
                name=_expect(fmt.get("name", ""), str, "text.format.name", "a string"),
                schema_json=json.dumps(schema),
            )
            if fmt.get("description") is not None:
                js.description = _expect(
                    fmt["description"], str, "text.format.description", "a string"
                )
            if fmt.get("strict") is not None:
                js.strict = _expect(fmt["strict"], bool, "text.format.strict", "a boolean")
            config.json_schema.CopyFrom(js)
        else:
            raise invalid(
                f"Unknown text.format type {kind!r}.", "text.format.type", "invalid_value"
            )
    if value.get("verbosity") is not None:
        config.verbosity = _expect(value["verbosity"], str, "text.verbosity", "a string")
    return config


def _reasoning(value: Any) -> pb.ReasoningConfig:
    _expect(value, dict, "reasoning", "an object")
    config = pb.ReasoningConfig()
    for key in ("effort", "summary"):
        if value.get(key) is not None:
            setattr(config, key, _expect(value[key], str, f"reasoning.{key}", "a string"))
    return config


def _integer(value: Any, param: str, limit: int = INT64_MAX) -> int:
    """An integer that fits its proto field (the core judges the meaningful range).

    JSON has one number type: `2.0` is the integer 2 (as JSON Schema's "integer" says), `2.5`
    and `1e400` are not integers.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    number: int = _expect(value, int, param, "an integer")
    if not -limit - 1 <= number <= limit:
        raise invalid(f"Invalid '{param}': {number} is out of range.", param, "invalid_value")
    return number


def _float(value: Any, param: str) -> float:
    number = _expect(value, (int, float), param, "a number")
    try:
        return float(number)
    except OverflowError as exc:  # an integer beyond any double
        raise invalid(f"Invalid '{param}': out of range.", param, "invalid_value") from exc


def _flag(obj: dict[str, Any], key: str, param: str | None = None) -> bool:
    """An optional boolean: null or absent is false."""
    value = obj.get(key)
    if value is None:
        return False
    return bool(_expect(value, bool, param or key, "a boolean"))


def _scalar(value: Any, param: str, kind: type | tuple[type, ...]) -> Any:
    """One top-level scalar parameter of SCALAR_PARAMS, checked for type and proto range."""
    if kind is int:
        return _integer(value, param, INT_LIMITS.get(param, INT64_MAX))
    if kind == NUMBER:
        return _float(value, param)
    return _expect(value, kind, param, EXPECTED[kind])


def params_from_json(body: Any) -> pb.CreateResponseParams:
    """A create (or input_tokens / compact) body as CreateResponseParams.

    Unknown fields are ignored: real clients send fields this server does not act on.
    """
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.", None, "invalid_type")
    params = pb.CreateResponseParams()
    model = body.get("model")
    if model is None:
        raise invalid("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    if body.get("input") is None:
        raise invalid("Missing required parameter: 'input'.", "input", "missing_required_parameter")
    for key, kind in SCALAR_PARAMS.items():
        if body.get(key) is not None:
            setattr(params, key, _scalar(body[key], key, kind))
    params.input.extend(_input(body["input"]))
    params.cache_breakpoints.extend(input_breakpoints(body["input"]))
    lifetimes(body, params)
    if body.get("tools") is not None:
        tools = _expect(body["tools"], list, "tools", "an array")
        params.tools.extend(_tool(t, f"tools[{i}]") for i, t in enumerate(tools))
    if body.get("tool_choice") is not None:
        params.tool_choice.CopyFrom(_tool_choice(body["tool_choice"]))
    if body.get("text") is not None:
        params.text.CopyFrom(_text(body["text"]))
    if body.get("reasoning") is not None:
        params.reasoning.CopyFrom(_reasoning(body["reasoning"]))
    conversation = body.get("conversation")
    if conversation is not None:
        if isinstance(conversation, dict):
            conversation = conversation.get("id")
            _expect(conversation, str, "conversation.id", "a string")
        params.conversation = _expect(conversation, str, "conversation", "a string or an object")
    if body.get("context_management") is not None:
        entries = _expect(body["context_management"], list, "context_management", "an array")
        for i, entry in enumerate(entries):
            where = f"context_management[{i}]"
            _expect(entry, dict, where, "an object")
            cm = pb.ContextManagement(
                type=_expect(entry.get("type"), str, f"{where}.type", "a string")
            )
            if entry.get("compact_threshold") is not None:
                cm.compact_threshold = _integer(
                    entry["compact_threshold"], f"{where}.compact_threshold"
                )
            params.context_management.append(cm)
    if body.get("metadata") is not None:
        metadata = _expect(body["metadata"], dict, "metadata", "an object")
        for key, value in metadata.items():
            params.metadata[key] = _expect(value, str, f"metadata.{key}", "a string")
    if body.get("include") is not None:
        include = _expect(body["include"], list, "include", "an array")
        params.include.extend(
            _expect(v, str, f"include[{i}]", "a string") for i, v in enumerate(include)
        )
    if body.get("chat_template_kwargs") is not None:
        kwargs = _expect(body["chat_template_kwargs"], dict, "chat_template_kwargs", "an object")
        params.chat_template_kwargs_json = json.dumps(kwargs)
    read_keep_alive(body, params)
    return params
