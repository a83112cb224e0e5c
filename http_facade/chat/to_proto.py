"""Decodes a Chat Completions body (chat/protocol.py declares it) into CreateResponseParams,
plus what only chat needs; the structured fields (messages, tools, response_format) by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlx_responses.http_facade.chat.protocol import FIELDS, TOOL_CALL
from mlx_responses.http_facade.kit.cache_hints import chat_breakpoints, lifetimes
from mlx_responses.http_facade.kit.decode import expect, proto_names
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.fields import fill_shaped
from mlx_responses.http_facade.kit.media import IMAGE_DETAILS, MediaPaths, url_image
from mlx_responses.http_facade.kit.sampling import (
    include_usage,
    stop_and_keep_alive,
    template_kwargs,
)
from mlx_responses.http_facade.kit.tools import function_tool, tool_choice

from mlx_responses.v1 import responses_pb2 as pb

LOGPROBS_INCLUDE = "message.output_text.logprobs"
MESSAGE_ROLES = ("system", "developer", "user", "assistant", "tool")
ROLES = proto_names(pb.Role, "system", "developer", "user")
# Chat content part types that carry media other than images; refused here.
CHAT_MEDIA_PARTS = {"input_audio", "file"}


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
    expect(content, list, param, "a string or an array of content parts")
    parts: list[pb.ContentPart] = []
    for i, part in enumerate(content):
        where = f"{param}[{i}]"
        expect(part, dict, where, "an object")
        kind = part.get("type")
        if kind == "text":
            text = expect(part.get("text"), str, f"{where}.text", "a string")
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
            text = expect(message[key], str, f"{param}.{key}", "a string")
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
        expect(calls, list, f"{param}.tool_calls", "an array")
        for i, call in enumerate(calls):
            where = f"{param}.tool_calls[{i}]"
            expect(call, dict, where, "an object")
            item = TOOL_CALL.build_in(pb.Item, "function_call", call, where)
            item.function_call.status = pb.ITEM_STATUS_COMPLETED
            items.append(item)
    return items


def messages_to_items(messages: Any, media: MediaPaths | None = None) -> list[pb.Item]:
    """Chat `messages` as Responses input items (the same history renders the same prompt);
    user messages may carry images where `media` is given (it records where they stood)."""
    expect(messages, list, "messages", "an array")
    if not messages:
        raise invalid("'messages' must not be empty.", "messages", "empty_array")
    items: list[pb.Item] = []
    for i, message in enumerate(messages):
        param = f"messages[{i}]"
        expect(message, dict, param, "an object")
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
            call_id = expect(message.get("tool_call_id"), str, f"{param}.tool_call_id", "a string")
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


def function_tools(value: Any) -> list[pb.Tool]:
    """Chat `tools`: function tools only (chat has no hosted tools)."""
    expect(value, list, "tools", "an array")
    tools = []
    for i, tool in enumerate(value):
        expect(tool, dict, f"tools[{i}]", "an object")
        if tool.get("type", "function") != "function":
            raise invalid(
                f"Unsupported tool type {tool.get('type')!r}: only function tools exist here.",
                f"tools[{i}].type",
                "unsupported_tool",
            )
        tools.append(function_tool(tool, f"tools[{i}]"))
    return tools


def chat_from_json(body: Any) -> ChatRequest:
    """A chat completions body (chat/protocol.py declares it) as a ChatRequest; unknown fields
    are ignored."""
    # Chat completions are not stored: a turn lives in the client's message list.
    params = pb.CreateResponseParams(store=False)
    body, values = FIELDS.decode(body, params)
    media = chat_media()
    params.input.extend(messages_to_items(body["messages"], media))
    # The items of a prefix of the messages, images allowed (their paths are not kept).
    params.cache_breakpoints.extend(
        chat_breakpoints(body["messages"], lambda m: messages_to_items(m, chat_media()))
    )
    lifetimes(body, params)
    cap = values.get("max_completion_tokens") or values.get("max_tokens")
    if cap is not None:
        params.max_output_tokens = cap
    stop_and_keep_alive(body, params)
    if body.get("tools") is not None:
        params.tools.extend(function_tools(body["tools"]))
    if body.get("tool_choice") is not None:
        params.tool_choice.CopyFrom(tool_choice(body["tool_choice"]))
    fill_shaped(FIELDS, values, params)  # response_format
    logprobs = bool(values.get("logprobs"))
    top = values.get("top_logprobs")
    if top is not None:
        if not logprobs:
            raise invalid("'top_logprobs' requires 'logprobs' to be true.", "top_logprobs")
        params.top_logprobs = top
    if logprobs:
        params.include.append(LOGPROBS_INCLUDE)
    effort = values.get("reasoning_effort")
    if effort is not None:
        params.reasoning.effort = effort
    kwargs = template_kwargs(body, reasoning_effort=effort)
    if kwargs is not None:
        params.chat_template_kwargs_json = kwargs
    return ChatRequest(params, values.get("n") or 1, logprobs, include_usage(body), media)


def chat_image(part: dict[str, Any], where: str, paths: MediaPaths) -> pb.ContentPart:
    """`{"type": "image_url", "image_url": {"url", "detail"}}`, or `image_url` as a bare URL."""
    value = part.get("image_url")
    if isinstance(value, str):
        paths.add(where, ".image_url", "image_url")
        return url_image(value, "")
    image: dict[str, Any] = expect(value, dict, f"{where}.image_url", "an object or a string")
    url = expect(image.get("url"), str, f"{where}.image_url.url", "a string")
    detail = image.get("detail")
    if detail is not None and (not isinstance(detail, str) or detail not in IMAGE_DETAILS):
        raise invalid(
            f"Invalid 'detail' {detail!r}: expected one of {', '.join(IMAGE_DETAILS)}.",
            f"{where}.image_url.detail",
            "invalid_value",
        )
    paths.add(where, ".image_url.url", "image_url")
    return url_image(url, detail or "")
