"""Decodes a Chat Completions body into CreateResponseParams (plus what only chat needs)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mlx_responses.http_facade.cache_hints import chat_breakpoints, lifetimes
from mlx_responses.http_facade.dialect_media import MediaPaths, chat_image
from mlx_responses.http_facade.errors import invalid
from mlx_responses.http_facade.keep_alive import read_keep_alive
from mlx_responses.http_facade.to_proto import (
    MEDIA_PARTS,
    _expect,
    _flag,
    _float,
    _integer,
    _scalar,
    _tool,
    _tool_choice,
)

from mlx_responses.v1 import responses_pb2 as pb

LOGPROBS_INCLUDE = "message.output_text.logprobs"
MAX_N = 16
# Top-level scalars copied onto CreateResponseParams under the same name.
SCALAR_PARAMS: dict[str, type | tuple[type, ...]] = {
    "model": str,
    "user": str,
    "safety_identifier": str,
    "prompt_cache_key": str,
    "service_tier": str,
    "parallel_tool_calls": bool,
}
MESSAGE_ROLES = ("system", "developer", "user", "assistant", "tool")
ROLES: dict[str, pb.Role] = {
    "system": pb.ROLE_SYSTEM,
    "developer": pb.ROLE_DEVELOPER,
    "user": pb.ROLE_USER,
}
# Chat content part types that carry media other than images; refused here.
CHAT_MEDIA_PARTS = {"input_audio", "file", *MEDIA_PARTS}


def chat_media() -> MediaPaths:
    """Where a chat request's images stood (its errors name `messages[i].content[j]`)."""
    return MediaPaths("chat", "Content part")


@dataclass(frozen=True)
class ChatRequest:
    """A decoded chat request: the core's params and the chat-only options around them."""

    params: pb.CreateResponseParams
    n: int = 1
    logprobs: bool = False
    include_usage: bool = False
    media: MediaPaths = field(default_factory=chat_media)


def _parts(content: Any, param: str, media: MediaPaths | None) -> list[pb.ContentPart]:
    """A string, or an array of `text` parts (and `image_url` parts where `media` is given):
    consecutive texts join into one part, so a text-only message renders as it always has."""
    if isinstance(content, str):
        return [pb.ContentPart(input_text=pb.InputText(text=content))]
    _expect(content, list, param, "a string or an array of content parts")
    parts: list[pb.ContentPart] = []
    for i, part in enumerate(content):
        where = f"{param}[{i}]"
        _expect(part, dict, where, "an object")
        kind = part.get("type")
        if kind == "text":
            text = _expect(part.get("text"), str, f"{where}.text", "a string")
            if parts and parts[-1].WhichOneof("part") == "input_text":
                parts[-1].input_text.text += text
            else:
                parts.append(pb.ContentPart(input_text=pb.InputText(text=text)))
        elif kind == "image_url" and media is not None:
            parts.append(chat_image(part, where, media))
        elif kind == "image_url":
            raise invalid(
                "Content part type 'image_url' is only supported in user messages.",
                f"{where}.type",
                "unsupported_content",
            )
        elif isinstance(kind, str) and kind in CHAT_MEDIA_PARTS:
            raise invalid(
                f"Content part type '{kind}' is not supported by /v1/chat/completions on this "
                "server; send images as image_url parts, files to /v1/responses (input_file).",
                f"{where}.type",
                "unsupported_content",
            )
        else:
            raise invalid(f"Unknown content part type {kind!r}.", f"{where}.type", "invalid_value")
    return parts or [pb.ContentPart(input_text=pb.InputText(text=""))]


def _text(content: Any, param: str) -> str:
    """A string, or the text of an array of `text` parts (media refused)."""
    return "".join(p.input_text.text for p in _parts(content, param, None))


def _message(role: pb.Role, text: str) -> pb.Item:
    part = (
        pb.ContentPart(output_text=pb.OutputText(text=text))
        if role == pb.ROLE_ASSISTANT
        else pb.ContentPart(input_text=pb.InputText(text=text))
    )
    return pb.Item(message=pb.MessageItem(role=role, content=[part]))


def _assistant(message: dict[str, Any], param: str) -> list[pb.Item]:
    items = []
    for key in ("reasoning_content", "reasoning"):
        if message.get(key) is not None:
            text = _expect(message[key], str, f"{param}.{key}", "a string")
            break
    else:
        text = ""
    if text:
        items.append(pb.Item(reasoning=pb.ReasoningItem(content=[pb.ReasoningText(text=text)])))
    content = message.get("content")
    if content is not None:
        text = _text(content, f"{param}.content")
        if text:
            items.append(_message(pb.ROLE_ASSISTANT, text))
    calls = message.get("tool_calls")
    if calls is not None:
        _expect(calls, list, f"{param}.tool_calls", "an array")
        for i, call in enumerate(calls):
            where = f"{param}.tool_calls[{i}]"
            _expect(call, dict, where, "an object")
            fn = _expect(call.get("function"), dict, f"{where}.function", "an object")
            arguments = fn.get("arguments", "")
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments)
            items.append(
                pb.Item(
                    function_call=pb.FunctionCallItem(
                        call_id=_expect(call.get("id"), str, f"{where}.id", "a string"),
                        name=_expect(fn.get("name"), str, f"{where}.function.name", "a string"),
                        arguments=_expect(
                            arguments, str, f"{where}.function.arguments", "a string"
                        ),
                        status=pb.ITEM_STATUS_COMPLETED,
                    )
                )
            )
    return items


def messages_to_items(messages: Any, media: MediaPaths | None = None) -> list[pb.Item]:
    """Chat `messages` as Responses input items (the same history renders the same prompt);
    user messages may carry images where `media` is given (it records where they stood)."""
    _expect(messages, list, "messages", "an array")
    if not messages:
        raise invalid("'messages' must not be empty.", "messages", "empty_array")
    items: list[pb.Item] = []
    for i, message in enumerate(messages):
        param = f"messages[{i}]"
        _expect(message, dict, param, "an object")
        role = message.get("role")
        if role in ("system", "developer", "user"):
            if message.get("content") is None:
                raise invalid(f"Missing required parameter: '{param}.content'.", f"{param}.content")
            where = f"{param}.content"
            if role == "user" and media is not None:
                parts = _parts(message["content"], where, media)
                user = pb.MessageItem(role=pb.ROLE_USER, content=parts)
                items.append(pb.Item(message=user))
            else:
                items.append(_message(ROLES[role], _text(message["content"], where)))
        elif role == "assistant":
            items.extend(_assistant(message, param))
        elif role == "tool":
            call_id = _expect(message.get("tool_call_id"), str, f"{param}.tool_call_id", "a string")
            output = _text(message.get("content", ""), f"{param}.content")
            if media is not None:
                media.add_output(param, ".tool_call_id", "tool message")
            items.append(
                pb.Item(
                    function_call_output=pb.FunctionCallOutputItem(call_id=call_id, output=output)
                )
            )
        else:
            raise invalid(
                f"Invalid 'role' {role!r}: expected one of {', '.join(MESSAGE_ROLES)}.",
                f"{param}.role",
                "invalid_value",
            )
    return items


def response_format(value: Any) -> pb.TextConfig:
    """`response_format` as the Responses `text` configuration."""
    _expect(value, dict, "response_format", "an object")
    config = pb.TextConfig()
    kind = value.get("type")
    if kind == "text":
        config.text.SetInParent()
    elif kind == "json_object":
        config.json_object.SetInParent()
    elif kind == "json_schema":
        spec = _expect(value.get("json_schema"), dict, "response_format.json_schema", "an object")
        schema = spec.get("schema", {"type": "object"})
        _expect(schema, dict, "response_format.json_schema.schema", "an object")
        js = pb.TextFormatJsonSchema(
            name=_expect(spec.get("name"), str, "response_format.json_schema.name", "a string"),
            schema_json=json.dumps(schema),
        )
        if spec.get("description") is not None:
            js.description = _expect(
                spec["description"], str, "response_format.json_schema.description", "a string"
            )
        if spec.get("strict") is not None:
            js.strict = _expect(
                spec["strict"], bool, "response_format.json_schema.strict", "a boolean"
            )
        config.json_schema.CopyFrom(js)
    else:
        raise invalid(
            f"Unknown response_format type {kind!r}.", "response_format.type", "invalid_value"
        )
    return config


def stop_sequences(value: Any, param: str) -> list[str]:
    """`stop`: a string or an array of strings."""
    if isinstance(value, str):
        return [value]
    _expect(value, list, param, "a string or an array of strings")
    return [_expect(s, str, f"{param}[{i}]", "a string") for i, s in enumerate(value)]


def function_tools(value: Any) -> list[pb.Tool]:
    """Chat `tools`: function tools only (chat has no hosted tools)."""
    _expect(value, list, "tools", "an array")
    tools = []
    for i, tool in enumerate(value):
        _expect(tool, dict, f"tools[{i}]", "an object")
        if tool.get("type", "function") != "function":
            raise invalid(
                f"Unsupported tool type {tool.get('type')!r}: only function tools exist here.",
                f"tools[{i}].type",
                "unsupported_tool",
            )
        tools.append(_tool({**tool, "type": "function"}, f"tools[{i}]"))
    return tools


def template_kwargs(body: dict[str, Any], **extra: Any) -> str | None:
    """`chat_template_kwargs` (vLLM's extension) with `extra` on top, as JSON text."""
    kwargs: dict[str, Any] = {}
    if body.get("chat_template_kwargs") is not None:
        kwargs.update(
            _expect(body["chat_template_kwargs"], dict, "chat_template_kwargs", "an object")
        )
    kwargs.update({k: v for k, v in extra.items() if v is not None})
    return json.dumps(kwargs) if kwargs else None


def max_tokens(body: dict[str, Any], *names: str) -> int | None:
    """The first of `names` present, as an output cap of at least 1 (each present is checked)."""
    caps = []
    for name in names:
        if body.get(name) is not None:
            value = _integer(body[name], name)
            if value < 1:
                raise invalid(
                    f"Invalid '{name}': {value}; must be at least 1.", name, "invalid_value"
                )
            caps.append(value)
    return caps[0] if caps else None


def sampling(body: dict[str, Any], params: pb.CreateResponseParams) -> None:
    """`stop`, `seed`, `n`-independent sampling fields and `keep_alive`, shared by chat and
    completions."""
    if body.get("stop") is not None:
        params.stop.extend(stop_sequences(body["stop"], "stop"))
    if body.get("seed") is not None:
        params.seed = _integer(body["seed"], "seed")
    read_keep_alive(body, params)
    for key in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        if body.get(key) is not None:
            setattr(params, key, _float(body[key], key))


def choices(body: dict[str, Any]) -> int:
    """`n`: how many choices, 1 to MAX_N."""
    if body.get("n") is None:
        return 1
    n = _integer(body["n"], "n")
    if not 1 <= n <= MAX_N:
        raise invalid(f"Invalid 'n': {n}; must be between 1 and {MAX_N}.", "n", "invalid_value")
    return n


def include_usage(body: dict[str, Any]) -> bool:
    """`stream_options.include_usage`."""
    options = body.get("stream_options")
    if options is None:
        return False
    _expect(options, dict, "stream_options", "an object")
    return _flag(options, "include_usage", "stream_options.include_usage")


def chat_from_json(body: Any) -> ChatRequest:
    """A chat completions body as a ChatRequest; unknown fields are ignored."""
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.", None, "invalid_type")
    if body.get("model") is None:
        raise invalid("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    if body.get("messages") is None:
        raise invalid(
            "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
        )
    # Chat completions are not stored: a turn lives in the client's message list.
    params = pb.CreateResponseParams(store=False)
    for key, kind in SCALAR_PARAMS.items():
        if body.get(key) is not None:
            setattr(params, key, _scalar(body[key], key, kind))
    media = chat_media()
    params.input.extend(messages_to_items(body["messages"], media))
    # The items of a prefix of the messages, images allowed (their paths are not kept).
    params.cache_breakpoints.extend(
        chat_breakpoints(body["messages"], lambda m: messages_to_items(m, chat_media()))
    )
    lifetimes(body, params)
    params.stream = _flag(body, "stream")
    cap = max_tokens(body, "max_completion_tokens", "max_tokens")
    if cap is not None:
        params.max_output_tokens = cap
    sampling(body, params)
    if body.get("tools") is not None:
        params.tools.extend(function_tools(body["tools"]))
    if body.get("tool_choice") is not None:
        params.tool_choice.CopyFrom(_tool_choice(body["tool_choice"]))
    if body.get("response_format") is not None:
        params.text.CopyFrom(response_format(body["response_format"]))
    logprobs = _flag(body, "logprobs")
    if body.get("top_logprobs") is not None:
        top = _integer(body["top_logprobs"], "top_logprobs", 2**31 - 1)
        if not logprobs:
            raise invalid("'top_logprobs' requires 'logprobs' to be true.", "top_logprobs")
        params.top_logprobs = top
    if logprobs:
        params.include.append(LOGPROBS_INCLUDE)
    effort = body.get("reasoning_effort")
    if effort is not None:
        _expect(effort, str, "reasoning_effort", "a string")
        params.reasoning.effort = effort
    kwargs = template_kwargs(body, reasoning_effort=effort)
    if kwargs is not None:
        params.chat_template_kwargs_json = kwargs
    return ChatRequest(params, choices(body), logprobs, include_usage(body), media)
