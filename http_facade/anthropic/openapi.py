"""The OpenAPI schemas and operations of Anthropic Messages (its request: anthropic/protocol.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.anthropic import routes
from mlx_responses.http_facade.anthropic.protocol import COUNT_FIELDS, FIELDS
from mlx_responses.http_facade.kit.errors import ANTHROPIC_ERROR_TYPES
from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import Operation, Schema, ts

DESCRIPTION = "Unknown fields are accepted and ignored. Nothing is stored."


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


BLOCK = (
    "{type: 'text', text: string} | {type: 'thinking', thinking: string, signature: string}"
    " | {type: 'tool_use', id: string, name: string, input: object}"
)
DELTA = (
    "{type: 'text_delta', text: string} | {type: 'thinking_delta', thinking: string}"
    " | {type: 'signature_delta', signature: string}"
    " | {type: 'input_json_delta', partial_json: string}"
)
EVENT = (
    "{type: 'message_start', message: object} | {type: 'ping' | 'message_stop'}"
    f" | {{type: 'content_block_start', index: integer, content_block: {BLOCK}}}"
    f" | {{type: 'content_block_delta', index: integer, delta: {DELTA}}}"
    " | {type: 'content_block_stop', index: integer} | {type: 'message_delta',"
    " delta: {stop_reason: STOP, stop_sequence: string|null}, usage: $AnthropicUsage}"
    " | $AnthropicError"
)


def schemas() -> dict[str, Schema]:
    stop = {"enum": ["end_turn", "max_tokens", "stop_sequence", "tool_use"]}
    errors = {"enum": sorted({*ANTHROPIC_ERROR_TYPES.values(), "invalid_request_error"})}
    return {
        "AnthropicMessageRequest": request_schema(FIELDS, DESCRIPTION),
        "AnthropicCountTokensRequest": request_schema(COUNT_FIELDS, DESCRIPTION),
        "AnthropicUsage": ts(
            "{input_tokens: integer, output_tokens: integer, cache_read_input_tokens?: integer,"
            " cache_creation_input_tokens?: integer}"
        ),
        "AnthropicMessage": ts(
            "{id: string, type: 'message', role: 'assistant', model: string,"
            f" content: ({BLOCK})[], stop_reason: STOP, stop_sequence: string|null,"
            " usage: $AnthropicUsage}",
            STOP=stop,
        ),
        "AnthropicStreamEvent": ts(EVENT, STOP=stop),
        "AnthropicTokenCount": ts("{input_tokens: integer}"),
        "AnthropicError": ts("{type: 'error', error: {type: E, message: string}}", E=errors),
    }
