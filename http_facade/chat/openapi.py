"""The OpenAPI schemas and operations of Chat Completions (its request: chat/protocol.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.chat import routes
from mlx_responses.http_facade.chat.protocol import FIELDS
from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import (
    INTEGER,
    NUMBER,
    OPT_STRING,
    STRING,
    Operation,
    Schema,
    array,
    nullable,
    obj,
    ref,
)

FINISH_REASONS = ["stop", "length", "tool_calls"]


def operations() -> dict[Callable[..., Any], Operation]:
    return {
        routes.create_chat_completion: Operation(
            "ChatCompletionRequest",
            "ChatCompletion",
            streams=True,
            stream_event="ChatCompletionStreamEvent",
            stream_done=True,
        ),
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


def _logprobs() -> Schema:
    top = obj(("token", "logprob", "bytes"), token=STRING, logprob=NUMBER, bytes=array(INTEGER))
    token = {**top, "properties": {**top["properties"], "top_logprobs": array(top)}}
    return nullable(obj(("content",), content=array(token), refusal={"type": "null"}))


def _usage() -> Schema:
    return obj(
        ("prompt_tokens", "completion_tokens", "total_tokens"),
        prompt_tokens=INTEGER,
        completion_tokens=INTEGER,
        total_tokens=INTEGER,
        prompt_tokens_details=obj(
            ("cached_tokens",), cached_tokens=INTEGER, cache_write_tokens=INTEGER
        ),
        completion_tokens_details=obj(
            ("reasoning_tokens",),
            reasoning_tokens=INTEGER,
            accepted_prediction_tokens=INTEGER,
            rejected_prediction_tokens=INTEGER,
        ),
    )


def schemas() -> dict[str, Schema]:
    tool_call = obj(
        ("id", "type", "function"),
        id=STRING,
        type={"const": "function"},
        function=obj(("name", "arguments"), name=STRING, arguments=STRING),
    )
    message = obj(
        ("role", "content"),
        role={"const": "assistant"},
        content=OPT_STRING,
        refusal=OPT_STRING,
        reasoning=STRING,
        reasoning_content=STRING,
        tool_calls=array(tool_call),
    )
    choice = obj(
        ("index", "message", "finish_reason", "logprobs"),
        index=INTEGER,
        message=message,
        logprobs=_logprobs(),
        finish_reason={"enum": FINISH_REASONS},
    )
    chunk_tool_call = obj(
        ("index",),
        index=INTEGER,
        id=STRING,
        type={"const": "function"},
        function=obj(name=STRING, arguments=STRING),
    )
    delta = obj(
        role={"const": "assistant"},
        content=STRING,
        reasoning=STRING,
        reasoning_content=STRING,
        tool_calls=array(chunk_tool_call),
    )
    chunk_choice = obj(
        ("index", "delta", "finish_reason"),
        index=INTEGER,
        delta=delta,
        logprobs=_logprobs(),
        finish_reason=nullable({"enum": FINISH_REASONS}),
    )
    common = {"id": STRING, "created": INTEGER, "model": STRING, "system_fingerprint": STRING}
    return {
        "ChatCompletionRequest": _request(),
        "ChatUsage": _usage(),
        "ChatCompletion": obj(
            ("id", "object", "created", "model", "choices", "usage"),
            object={"const": "chat.completion"},
            choices=array(choice),
            usage=ref("ChatUsage"),
            service_tier=STRING,
            **common,
        ),
        # A stream the core breaks off ends with an error frame (no [DONE]).
        "ChatCompletionStreamEvent": {"anyOf": [ref("ChatCompletionChunk"), ref("Error")]},
        "ChatCompletionChunk": obj(
            ("id", "object", "created", "model", "choices"),
            object={"const": "chat.completion.chunk"},
            choices=array(chunk_choice),
            usage=ref("ChatUsage"),
            **common,
        ),
    }
