"""The OpenAPI schemas and operations of Anthropic Messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.anthropic import routes
from mlx_responses.http_facade.anthropic.cache_control import TTLS
from mlx_responses.http_facade.anthropic.to_proto import TOOL_CHOICE_MODES
from mlx_responses.http_facade.kit.decode import INT32_MAX
from mlx_responses.http_facade.kit.errors import ANTHROPIC_ERROR_TYPES
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.kit.openapi import (
    BOOLEAN,
    INTEGER,
    NON_EMPTY_STRING,
    OBJECT,
    OPT_STRING,
    STRING,
    Operation,
    Schema,
    array,
    integer,
    nullable,
    number,
    obj,
    ref,
    stop_sequences,
)
from mlx_responses.service.limits import MAX_STOP_SEQUENCES

STOP_REASONS = ["end_turn", "max_tokens", "stop_sequence", "tool_use"]
# Left out of the schema (as input_image is from CreateResponseRequest): a text model refuses
# images, so no request holding one is valid for every model.
IMAGE_NOTE = (
    "A user message may also hold `image` blocks for a vision model: "
    '`{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "..."}}` '
    '(jpeg, png, gif, webp) or `{"type": "image", "source": {"type": "url", "url": "..."}}` '
    "(with `--allow-remote-media`). A text-only model refuses them with a 400 naming "
    "`messages[i].content[j]`; an image inside a `tool_result` is refused (tool outputs are text)."
)


def operations() -> dict[Callable[..., Any], Operation]:
    return {
        routes.create_message: Operation(
            "AnthropicMessageRequest",
            "AnthropicMessage",
            streams=True,
            stream_event="AnthropicStreamEvent",
            error="AnthropicError",
        ),
        routes.count_tokens: Operation(
            "AnthropicCountTokensRequest", "AnthropicTokenCount", error="AnthropicError"
        ),
    }


def _request(required: tuple[str, ...]) -> Schema:
    """What `messages_from_json` takes, field by field (the fuzz test holds them together)."""
    # A cache breakpoint (`cache_control.py`): on text, tool_use and tool_result blocks, tools
    # and the body itself.
    cache = nullable(
        obj(("type",), type={"const": "ephemeral"}, ttl=nullable({"enum": list(TTLS)}))
    )
    text = obj(("type", "text"), type={"const": "text"}, text=STRING, cache_control=cache)
    texts = {"anyOf": [STRING, array(text)]}
    thinking = obj(("type", "thinking"), type={"const": "thinking"}, thinking=STRING)
    redacted = obj(("type",), type={"const": "redacted_thinking"})
    tool_use = obj(
        ("type", "id", "name"),
        type={"const": "tool_use"},
        id=STRING,
        name=STRING,
        input=OBJECT,
        cache_control=cache,
    )
    tool_result = obj(
        ("type", "tool_use_id"),
        type={"const": "tool_result"},
        tool_use_id=STRING,
        content=nullable(texts),
        is_error=nullable(BOOLEAN),
        cache_control=cache,
    )
    # Blocks by role: a user turn carries text and tool results, an assistant turn text,
    # thinking and tool calls, a system turn (Claude Code sends them in `messages`) text.
    blocks = {
        "user": [text, tool_result],
        "assistant": [text, thinking, redacted, tool_use],
        "system": [text],
    }
    message = {
        "anyOf": [
            obj(
                ("role", "content"),
                role={"const": role},
                content={"anyOf": [STRING, array({"anyOf": kinds})]},
            )
            for role, kinds in blocks.items()
        ],
        "description": IMAGE_NOTE,
    }
    custom_tool = obj(
        ("name",),
        type=nullable({"const": "custom"}),
        name=STRING,
        description=OPT_STRING,
        input_schema=OBJECT,
        cache_control=cache,
    )
    # Any other type is an Anthropic server tool: the core refuses it, or drops it under
    # `--hosted-tools drop`.
    server_tool = obj(("type",), type={"type": "string", "not": {"const": "custom"}})
    tool_choice = {
        "anyOf": [
            obj(
                ("type",),
                type={"enum": sorted(TOOL_CHOICE_MODES)},
                disable_parallel_tool_use=nullable(BOOLEAN),
            ),
            obj(
                ("type", "name"),
                type={"const": "tool"},
                name=STRING,
                disable_parallel_tool_use=nullable(BOOLEAN),
            ),
        ]
    }
    thinking_config = {
        "anyOf": [
            obj(
                ("type", "budget_tokens"),
                type={"const": "enabled"},
                budget_tokens=integer(1),
            ),
            obj(("type",), type={"enum": ["adaptive", "between_tools", "disabled"]}),
        ]
    }
    return {
        "type": "object",
        "required": list(required),
        "description": "Unknown fields are accepted and ignored. Nothing is stored.",
        "properties": {
            "model": NON_EMPTY_STRING,
            "messages": {**array(message), "minItems": 1},
            "system": nullable(texts),
            "max_tokens": integer(1) if "max_tokens" in required else nullable(integer(1)),
            "stop_sequences": nullable(stop_sequences(MAX_STOP_SEQUENCES)),
            "temperature": nullable(number(0, 2)),
            "top_p": nullable(number(0, 1)),
            "top_k": nullable(integer(0, INT32_MAX)),
            "tools": nullable(array({"anyOf": [custom_tool, server_tool]})),
            "tool_choice": nullable(tool_choice),
            "thinking": nullable(thinking_config),
            "stream": nullable(BOOLEAN),
            "metadata": nullable(obj(user_id=OPT_STRING)),
            "chat_template_kwargs": nullable(OBJECT),
            "cache_control": cache,
            "keep_alive": KEEP_ALIVE_SCHEMA,
        },
    }


def _content_block() -> Schema:
    return {
        "anyOf": [
            obj(("type", "text"), type={"const": "text"}, text=STRING),
            obj(
                ("type", "thinking", "signature"),
                type={"const": "thinking"},
                thinking=STRING,
                signature=STRING,
            ),
            obj(
                ("type", "id", "name", "input"),
                type={"const": "tool_use"},
                id=STRING,
                name=STRING,
                input=OBJECT,
            ),
        ]
    }


def _stream_event() -> Schema:
    delta = {
        "anyOf": [
            obj(("type", "text"), type={"const": "text_delta"}, text=STRING),
            obj(("type", "thinking"), type={"const": "thinking_delta"}, thinking=STRING),
            obj(("type", "signature"), type={"const": "signature_delta"}, signature=STRING),
            obj(("type", "partial_json"), type={"const": "input_json_delta"}, partial_json=STRING),
        ]
    }
    return {
        "anyOf": [
            obj(("type", "message"), type={"const": "message_start"}, message=OBJECT),
            obj(("type",), type={"enum": ["ping", "message_stop"]}),
            obj(
                ("type", "index", "content_block"),
                type={"const": "content_block_start"},
                index=INTEGER,
                content_block=_content_block(),
            ),
            obj(
                ("type", "index", "delta"),
                type={"const": "content_block_delta"},
                index=INTEGER,
                delta=delta,
            ),
            obj(("type", "index"), type={"const": "content_block_stop"}, index=INTEGER),
            obj(
                ("type", "delta", "usage"),
                type={"const": "message_delta"},
                delta=obj(
                    ("stop_reason", "stop_sequence"),
                    stop_reason={"enum": STOP_REASONS},
                    stop_sequence=OPT_STRING,
                ),
                usage=ref("AnthropicUsage"),
            ),
            ref("AnthropicError"),
        ]
    }


def schemas() -> dict[str, Schema]:
    return {
        "AnthropicMessageRequest": _request(("model", "messages", "max_tokens")),
        "AnthropicCountTokensRequest": _request(("model", "messages")),
        "AnthropicUsage": obj(
            ("input_tokens", "output_tokens"),
            input_tokens=INTEGER,
            output_tokens=INTEGER,
            cache_read_input_tokens=INTEGER,
            cache_creation_input_tokens=INTEGER,
        ),
        "AnthropicMessage": obj(
            ("id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"),
            id=STRING,
            type={"const": "message"},
            role={"const": "assistant"},
            model=STRING,
            content=array(_content_block()),
            stop_reason={"enum": STOP_REASONS},
            stop_sequence=OPT_STRING,
            usage=ref("AnthropicUsage"),
        ),
        "AnthropicStreamEvent": _stream_event(),
        "AnthropicTokenCount": obj(("input_tokens",), input_tokens=INTEGER),
        "AnthropicError": obj(
            ("type", "error"),
            type={"const": "error"},
            error=obj(
                ("type", "message"),
                type={"enum": sorted({*ANTHROPIC_ERROR_TYPES.values(), "invalid_request_error"})},
                message=STRING,
            ),
        ),
    }
