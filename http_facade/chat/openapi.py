"""The OpenAPI schemas and operations of Chat Completions (its request: chat/protocol.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.chat import routes
from mlx_responses.http_facade.chat.protocol import FIELDS
from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import INTEGER, Operation, Schema, ts

FINISH_REASONS = ["stop", "length", "tool_calls"]


def operations() -> dict[Callable[..., Any], Operation]:
    stream: dict[str, Any] = {
        "streams": True,
        "stream_event": "ChatCompletionStreamEvent",
        "stream_done": True,
    }
    return {
        routes.create_chat_completion: Operation(
            "ChatCompletionRequest", "ChatCompletion", **stream
        )
    }


def _request() -> Schema:
    """What `chat_from_json` takes (the fuzz test holds them together)."""
    return request_schema(
        FIELDS,
        "Unknown fields are accepted and ignored. Nothing is stored.",
        # `top_logprobs` needs `logprobs: true`.
        **{
            "if": {"required": ["top_logprobs"], "properties": {"top_logprobs": INTEGER}},
            "then": {"required": ["logprobs"], "properties": {"logprobs": {"const": True}}},
        },
    )


# A choice's token logprobs, its usage, and the fields an answer and its chunks share.
LOGPROBS = "?{content: TOKEN[], refusal?: null}"
TOP = "token: string, logprob: number, bytes: integer[]"
USAGE = (
    "{prompt_tokens: integer, completion_tokens: integer, total_tokens: integer,"
    " prompt_tokens_details?: {cached_tokens: integer, cache_write_tokens?: integer},"
    " completion_tokens_details?: {reasoning_tokens: integer, accepted_prediction_tokens?:"
    " integer, rejected_prediction_tokens?: integer}}"
)
COMMON = "id: string, created: integer, model: string, system_fingerprint?: string"
REQUIRED = ["id", "object", "created", "model", "choices"]


def schemas() -> dict[str, Schema]:
    names = {"TOKEN": ts(f"{{{TOP}, top_logprobs?: {{{TOP}}}[]}}"), "F": {"enum": FINISH_REASONS}}
    message = (
        "{role: 'assistant', content: string|null, refusal?: string|null, reasoning?: string,"
        " reasoning_content?: string, tool_calls?: {id: string, type: 'function', function:"
        " {name: string, arguments: string}}[]}"
    )
    delta = (
        "{role?: 'assistant', content?: string, reasoning?: string, reasoning_content?: string,"
        " tool_calls?: {index: integer, id?: string, type?: 'function', function?: {name?:"
        " string, arguments?: string}}[]}"
    )
    answer = ts(
        "{object: 'chat.completion', choices: {index: integer, message: M, logprobs?: L,"
        f" finish_reason: F}}[], usage: $ChatUsage, service_tier?: string, {COMMON}}}",
        M=ts(message),
        L=ts(LOGPROBS, **names),
        **names,
    )
    chunk = ts(
        "{object: 'chat.completion.chunk', choices: {index: integer, delta: D, logprobs?: L,"
        f" finish_reason: ?F}}[], usage?: $ChatUsage, {COMMON}}}",
        D=ts(delta),
        L=ts(LOGPROBS, **names),
        **names,
    )
    answer["properties"]["choices"]["items"]["required"] = [
        "index",
        "message",
        "finish_reason",
        "logprobs",
    ]
    return {
        "ChatCompletionRequest": _request(),
        "ChatUsage": ts(USAGE),
        "ChatCompletion": {**answer, "required": [*REQUIRED, "usage"]},
        # A stream the core breaks off ends with an error frame (no [DONE]).
        "ChatCompletionStreamEvent": ts("$ChatCompletionChunk | $Error"),
        "ChatCompletionChunk": {**chunk, "required": REQUIRED},
    }
