"""The OpenAPI schemas and operations of Anthropic Messages (its request: anthropic/protocol.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.anthropic import routes
from mlx_responses.http_facade.anthropic.protocol import COUNT_FIELDS, FIELDS
from mlx_responses.http_facade.kit.errors import ANTHROPIC_ERROR_TYPES
from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import (
    INTEGER,
    OBJECT,
    OPT_STRING,
    STRING,
    Operation,
    Schema,
    array,
    obj,
    ref,
)

DESCRIPTION = "Unknown fields are accepted and ignored. Nothing is stored."
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
        "AnthropicMessageRequest": request_schema(FIELDS, DESCRIPTION),
        "AnthropicCountTokensRequest": request_schema(COUNT_FIELDS, DESCRIPTION),
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
