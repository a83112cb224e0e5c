"""The OpenAPI schemas and operations of Anthropic Messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.anthropic import routes
from mlx_responses.http_facade.errors import ANTHROPIC_ERROR_TYPES
from mlx_responses.http_facade.openapi_kit import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    OBJECT,
    OPT_STRING,
    STRING,
    Operation,
    Schema,
    array,
    nullable,
    obj,
    ref,
)

STOP_REASONS = ["end_turn", "max_tokens", "stop_sequence", "tool_use"]


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
    text = obj(("type", "text"), type={"const": "text"}, text=STRING)
    block = {
        "anyOf": [
            text,
            obj(("type", "thinking"), type={"const": "thinking"}, thinking=STRING),
            obj(
                ("type", "id", "name", "input"),
                type={"const": "tool_use"},
                id=STRING,
                name=STRING,
                input=OBJECT,
            ),
            obj(
                ("type", "tool_use_id"),
                type={"const": "tool_result"},
                tool_use_id=STRING,
                content=nullable({"anyOf": [STRING, array(text)]}),
                is_error=nullable(BOOLEAN),
            ),
        ]
    }
    message = obj(
        ("role", "content"),
        role={"enum": ["user", "assistant"]},
        content={"anyOf": [STRING, array(block)]},
    )
    tool = obj(("name",), name=STRING, description=OPT_STRING, input_schema=OBJECT)
    tool_choice = obj(
        ("type",),
        type={"enum": ["auto", "any", "tool", "none"]},
        name=STRING,
        disable_parallel_tool_use=nullable(BOOLEAN),
    )
    thinking = obj(
        ("type",),
        type={"enum": ["enabled", "adaptive", "between_tools", "disabled"]},
        budget_tokens=INTEGER,
    )
    return {
        "type": "object",
        "required": list(required),
        "description": "Unknown fields are accepted and ignored. Nothing is stored.",
        "properties": {
            "model": STRING,
            "messages": {**array(message), "minItems": 1},
            "system": nullable({"anyOf": [STRING, array(text)]}),
            "max_tokens": {"type": "integer", "minimum": 1},
            "stop_sequences": nullable(array(STRING)),
            "temperature": nullable(NUMBER),
            "top_p": nullable(NUMBER),
            "top_k": nullable({"type": "integer", "minimum": 0}),
            "tools": nullable(array(tool)),
            "tool_choice": nullable(tool_choice),
            "thinking": nullable(thinking),
            "stream": nullable(BOOLEAN),
            "metadata": nullable(obj(user_id=OPT_STRING)),
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
