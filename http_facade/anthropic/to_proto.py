"""Decodes an Anthropic Messages body (anthropic/protocol.py declares it) into
CreateResponseParams, the same items as Responses; the structured fields by hand."""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.anthropic.cache_control import marked, ttl_of
from mlx_responses.http_facade.anthropic.protocol import (
    COUNT_FIELDS,
    CUSTOM_TOOL,
    FIELDS,
    TOOL_CHOICE_MODES,
    TOOL_USE,
)
from mlx_responses.http_facade.kit.cache_hints import input_point
from mlx_responses.http_facade.kit.decode import expect, flag, integer, lookup
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.keep_alive import read_keep_alive
from mlx_responses.http_facade.kit.media import MediaPaths, url_image
from mlx_responses.http_facade.kit.sampling import stop_sequences, template_kwargs

from mlx_responses.v1 import responses_pb2 as pb

# Block types that carry media other than images (`image` blocks reach the core as input_image).
MEDIA_BLOCKS = {"document", "search_result", "container_upload"}
# NOTE: Claude Code (2.1) sends `system` messages inside `messages` too; they render in place.
MESSAGE_ROLES = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT, "system": pb.ROLE_SYSTEM}
# Anthropic's image source media types (its API refuses any other).
ANTHROPIC_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# Custom (client) tools carry no type, or `custom`; any other type is an Anthropic server tool.
CUSTOM_TOOL_TYPES = (None, "custom")


def anthropic_media() -> MediaPaths:
    """Where a Messages request's images stood (its errors name `messages[i].content[j]`)."""
    return MediaPaths("anthropic", "Content block")


def _unsupported(kind: str, where: str) -> Exception:
    return invalid(
        f"Content block type '{kind}' is not supported here.",
        f"{where}.type",
        "unsupported_content",
    )


def _text_block(block: dict[str, Any], where: str) -> str:
    return str(expect(block.get("text"), str, f"{where}.text", "a string"))


def _tool_result_text(content: Any, where: str) -> str:
    """A tool_result's content: a string, or its text blocks joined (media refused)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    expect(content, list, where, "a string or an array of content blocks")
    texts = []
    for i, block in enumerate(content):
        expect(block, dict, f"{where}[{i}]", "an object")
        kind = block.get("type")
        if kind == "image":
            # NOTE: a tool output is text in the core (FunctionCallOutputItem.output).
            raise invalid(
                "An 'image' block inside a tool_result is not supported: tool outputs are text "
                "on this server; send the image in a user message's content instead.",
                f"{where}[{i}].type",
                "unsupported_content",
            )
        if kind != "text":
            raise _unsupported(str(kind), f"{where}[{i}]")
        texts.append(_text_block(block, f"{where}[{i}]"))
    return "".join(texts)


# A cache_control breakpoint: after input[item] (after `chars` characters of its text), and
# the ttl it states in seconds.
Mark = tuple[int, int | None, int | None]


class _Items:
    """Items of one message, in block order; consecutive text and image blocks make one message
    item (consecutive texts one part)."""

    def __init__(self, role: pb.Role) -> None:
        self.role = role
        self.items: list[pb.Item] = []
        self._open: pb.MessageItem | None = None
        # cache_control: (item, its text's chars, the ttl stated)
        self.marks: list[Mark] = []

    def _message(self) -> pb.MessageItem:
        if self._open is None:
            self.items.append(pb.Item(message=pb.MessageItem(role=self.role)))
            self._open = self.items[-1].message
        return self._open

    def text(self, text: str) -> None:
        content = self._message().content
        kind = "output_text" if self.role == pb.ROLE_ASSISTANT else "input_text"
        if content and content[-1].WhichOneof("part") == kind:
            getattr(content[-1], kind).text += text
        elif self.role == pb.ROLE_ASSISTANT:
            content.append(pb.ContentPart(output_text=pb.OutputText(text=text)))
        else:
            content.append(pb.ContentPart(input_text=pb.InputText(text=text)))

    def image(self, part: pb.ContentPart) -> None:
        self._message().content.append(part)

    def add(self, item: pb.Item) -> None:
        self._open = None
        self.items.append(item)

    def mark(self, ttl: int | None) -> None:
        """A breakpoint after the last block: within a message's text, or after an item."""
        if self.items:
            chars = None
            if self._open is not None:  # the characters of its text so far (images count none)
                chars = sum(
                    len(getattr(part, kind).text)
                    for part in self._open.content
                    if (kind := part.WhichOneof("part")) in ("input_text", "output_text")
                )
            self.marks.append((len(self.items) - 1, chars, ttl))


def _blocks(
    role: pb.Role,
    content: Any,
    where: str,
    media: MediaPaths,
    marks: list[Mark] | None = None,
) -> list[pb.Item]:
    """A message's items; `marks` takes its cache_control breakpoints (`_Items.mark`)."""
    items = _Items(role)
    if isinstance(content, str):
        items.text(content)
        return items.items
    expect(content, list, where, "a string or an array of content blocks")
    for i, block in enumerate(content):
        at = f"{where}[{i}]"
        expect(block, dict, at, "an object")
        if marks is not None and i and marked(content[i - 1], f"{where}[{i - 1}]"):
            items.mark(ttl_of(content[i - 1]))
        kind = block.get("type")
        if kind == "text":
            items.text(_text_block(block, at))
        elif kind == "image" and role == pb.ROLE_USER:
            items.image(anthropic_image(block, at, media))
        elif kind == "thinking" and role == pb.ROLE_ASSISTANT:
            thinking = expect(block.get("thinking"), str, f"{at}.thinking", "a string")
            reasoning = pb.ReasoningItem(content=[pb.ReasoningText(text=thinking)])
            items.add(pb.Item(reasoning=reasoning))
        elif kind == "redacted_thinking" and role == pb.ROLE_ASSISTANT:
            continue  # opaque data of another server: nothing to render
        elif kind == "tool_use" and role == pb.ROLE_ASSISTANT:
            item = TOOL_USE.build_in(pb.Item, "function_call", block, at)
            item.function_call.status = pb.ITEM_STATUS_COMPLETED
            items.add(item)
        elif kind == "tool_result" and role == pb.ROLE_USER:
            output = _tool_result_text(block.get("content"), f"{at}.content")
            if flag(block, "is_error", f"{at}.is_error"):
                output = f"Error: {output}"
            result = pb.FunctionCallOutputItem(
                call_id=expect(block.get("tool_use_id"), str, f"{at}.tool_use_id", "a string"),
                output=output,
            )
            items.add(pb.Item(function_call_output=result))
            media.add_output(at, ".tool_use_id", "tool_result block")
        elif isinstance(kind, str) and kind in MEDIA_BLOCKS:
            raise _unsupported(kind, at)
        else:
            raise invalid(
                f"Content block type {kind!r} is not valid in a {pb.Role.Name(role)[5:].lower()} "
                "message.",
                f"{at}.type",
                "invalid_value",
            )
    if marks is not None:
        if content and marked(content[-1], f"{where}[{len(content) - 1}]"):
            items.mark(ttl_of(content[-1]))
        marks.extend(items.marks)
    return items.items


def _system(value: Any, marks: list[Mark]) -> pb.Item:
    """The system item (input[0]); `marks` takes its blocks' cache_control breakpoints."""
    if isinstance(value, str):
        text = value
    else:
        expect(value, list, "system", "a string or an array of text blocks")
        texts = []
        for i, block in enumerate(value):
            expect(block, dict, f"system[{i}]", "an object")
            if block.get("type") != "text":
                raise _unsupported(str(block.get("type")), f"system[{i}]")
            texts.append(_text_block(block, f"system[{i}]"))
            if marked(block, f"system[{i}]"):
                marks.append((0, len("\n\n".join(texts)), ttl_of(block)))
        text = "\n\n".join(texts)
    part = pb.ContentPart(input_text=pb.InputText(text=text))
    return pb.Item(message=pb.MessageItem(role=pb.ROLE_SYSTEM, content=[part]))


def messages_to_items(
    body: dict[str, Any],
    media: MediaPaths,
    breakpoints: list[pb.CacheBreakpoint] | None = None,
) -> list[pb.Item]:
    """`system` + `messages` as Responses input items (`media` records where images stood);
    `breakpoints` takes their cache_control breakpoints (a top-level `cache_control` marks the
    last item)."""
    messages = expect(body.get("messages"), list, "messages", "an array")
    if not messages:
        raise invalid("'messages' must not be empty.", "messages", "empty_array")
    items = []
    marks: list[Mark] = []
    if body.get("system") not in (None, "", []):
        items.append(_system(body["system"], marks))
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        expect(message, dict, where, "an object")
        role = lookup(MESSAGE_ROLES, message.get("role"))
        if role is None:
            raise invalid(
                f"Invalid 'role' {message.get('role')!r}: expected user, assistant or system.",
                f"{where}.role",
                "invalid_value",
            )
        if "content" not in message:
            raise invalid(f"Missing required parameter: '{where}.content'.", f"{where}.content")
        mine: list[Mark] = []
        start = len(items)
        items.extend(_blocks(role, message["content"], f"{where}.content", media, mine))
        marks += [(start + item, chars, ttl) for item, chars, ttl in mine]
    if marked(body, "") and items:
        marks.append((len(items) - 1, None, ttl_of(body)))
    if breakpoints is not None:
        breakpoints.extend(input_point(item, chars, ttl) for item, chars, ttl in marks)
    return items


def _tools(value: Any, breakpoints: list[pb.CacheBreakpoint]) -> list[pb.Tool]:
    expect(value, list, "tools", "an array")
    tools = []
    for i, tool in enumerate(value):
        where = f"tools[{i}]"
        expect(tool, dict, where, "an object")
        if marked(tool, where) and isinstance(tool.get("name"), str):
            mark = pb.CacheBreakpoint(tool=tool["name"])
            if (ttl := ttl_of(tool)) is not None:
                mark.ttl_seconds = ttl
            breakpoints.append(mark)
        kind = tool.get("type")
        if kind not in CUSTOM_TOOL_TYPES:
            # A server tool (web search, code execution, ...): the core's hosted-tool policy
            # refuses or drops it, as it does for Responses.
            kind = expect(kind, str, f"{where}.type", "a string")
            tools.append(pb.Tool(hosted=pb.HostedTool(type=kind)))
            continue
        tools.append(CUSTOM_TOOL.build_in(pb.Tool, "function", tool, where))
    return tools


def _tool_choice(value: Any, params: pb.CreateResponseParams) -> None:
    expect(value, dict, "tool_choice", "an object")
    kind = value.get("type")
    if kind == "tool":
        name = expect(value.get("name"), str, "tool_choice.name", "a string")
        params.tool_choice.function_name = name
    elif isinstance(kind, str) and kind in TOOL_CHOICE_MODES:
        params.tool_choice.mode = TOOL_CHOICE_MODES[kind]
    else:
        raise invalid(
            f"Invalid 'tool_choice.type' {kind!r}: expected auto, any, tool or none.",
            "tool_choice.type",
            "invalid_value",
        )
    if value.get("disable_parallel_tool_use") is not None:
        disable = expect(
            value["disable_parallel_tool_use"],
            bool,
            "tool_choice.disable_parallel_tool_use",
            "a boolean",
        )
        params.parallel_tool_calls = not disable


def _thinking(value: Any, params: pb.CreateResponseParams) -> bool | None:
    """`thinking` as the template's enable_thinking, and its budget as the core's.

    NOTE: Anthropic requires budget_tokens >= 1024; a small local model thinks in far fewer,
    so any budget of at least 1 is taken.
    """
    expect(value, dict, "thinking", "an object")
    kind = value.get("type")
    if kind == "enabled":
        budget = integer(value.get("budget_tokens"), "thinking.budget_tokens")
        if budget < 1:
            raise invalid(
                "'thinking.budget_tokens' must be at least 1.",
                "thinking.budget_tokens",
                "invalid_value",
            )
        params.reasoning_budget = budget
        return True
    if kind in ("adaptive", "between_tools"):  # between_tools: thinking, at the model's pace
        return True
    if kind == "disabled":
        return False
    raise invalid(
        f"Invalid 'thinking.type' {kind!r}: expected enabled, adaptive, between_tools or disabled.",
        "thinking.type",
        "invalid_value",
    )


def messages_from_json(
    body: Any, *, count_only: bool = False, media: MediaPaths | None = None
) -> pb.CreateResponseParams:
    """A Messages (or count_tokens) body (anthropic/protocol.py declares them) as
    CreateResponseParams; unknown fields are ignored. `media`, if given, learns where the
    request's images stood."""
    fields = COUNT_FIELDS if count_only else FIELDS
    params = pb.CreateResponseParams(store=False)
    body, _ = fields.decode(body, params, "{}: Field required")
    breakpoints: list[pb.CacheBreakpoint] = []
    media = media if media is not None else anthropic_media()
    params.input.extend(messages_to_items(body, media, breakpoints))
    if body.get("stop_sequences") is not None:
        params.stop.extend(stop_sequences(body["stop_sequences"], "stop_sequences"))
    if body.get("tools") is not None:
        params.tools.extend(_tools(body["tools"], breakpoints))
    params.cache_breakpoints.extend(breakpoints)
    if body.get("tool_choice") is not None:
        _tool_choice(body["tool_choice"], params)
    thinking = _thinking(body["thinking"], params) if body.get("thinking") is not None else None
    kwargs = template_kwargs(body, enable_thinking=thinking)
    if kwargs is not None:
        params.chat_template_kwargs_json = kwargs
    metadata = body.get("metadata")
    if metadata is not None:
        expect(metadata, dict, "metadata", "an object")
        if metadata.get("user_id") is not None:
            params.user = expect(metadata["user_id"], str, "metadata.user_id", "a string")
    read_keep_alive(body, params)
    return params


def anthropic_image(block: dict[str, Any], where: str, paths: MediaPaths) -> pb.ContentPart:
    """An `image` block: a `base64` source as a data: URL, a `url` source as that URL."""
    source = expect(block.get("source"), dict, f"{where}.source", "an object")
    kind = source.get("type")
    if kind == "base64":
        mime = expect(source.get("media_type"), str, f"{where}.source.media_type", "a string")
        if mime not in ANTHROPIC_MEDIA_TYPES:
            raise invalid(
                f"Invalid 'media_type' {mime!r}: expected one of "
                f"{', '.join(ANTHROPIC_MEDIA_TYPES)}.",
                f"{where}.source.media_type",
                "invalid_value",
            )
        data = expect(source.get("data"), str, f"{where}.source.data", "a string")
        paths.add(where, ".source.data", "image")
        return url_image(f"data:{mime};base64,{data}", "")
    if kind == "url":
        url = expect(source.get("url"), str, f"{where}.source.url", "a string")
        paths.add(where, ".source.url", "image")
        return url_image(url, "")
    raise invalid(
        f"Invalid 'source.type' {kind!r}: expected base64 or url (this server has no Files API).",
        f"{where}.source.type",
        "invalid_value",
    )
