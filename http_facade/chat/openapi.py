"""The OpenAPI schemas and operations of Chat Completions and legacy Completions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.chat import routes
from mlx_responses.http_facade.chat.to_proto import SCALAR_PARAMS
from mlx_responses.http_facade.kit.cache_hints import (
    prompt_cache_lifetimes,
)
from mlx_responses.http_facade.kit.openapi import (
    BOOLEAN,
    INTEGER,
    NON_EMPTY_STRING,
    NUMBER,
    OBJECT,
    OPT_STRING,
    STRING,
    Operation,
    Schema,
    array,
    integer,
    nullable,
    obj,
    ref,
)
from mlx_responses.http_facade.kit.sampling import MAX_N, SAMPLING
from mlx_responses.http_facade.kit.tools import function_tool_schema, tool_choice_schema
from mlx_responses.service.limits import MAX_TOP_LOGPROBS

FINISH_REASONS = ["stop", "length", "tool_calls"]
# Left out of the schema (as input_image is from CreateResponseRequest): a text model refuses
# images, so no request holding one is valid for every model.
IMAGE_NOTE = (
    "A user message's content may also hold image parts for a vision model: "
    '`{"type": "image_url", "image_url": {"url": "data:image/png;base64,...", "detail": '
    '"auto|low|high"}}` (`image_url` may be the URL string itself; http(s) URLs need '
    "`--allow-remote-media`). A text-only model refuses them with a 400 `unsupported_content` "
    "naming `messages[i].content[j].type`."
)


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
    breakpoint = obj(("mode",), mode={"const": "explicit"}, ttl=nullable({"enum": ["30m", "12h"]}))
    text_part = obj(
        ("type", "text"),
        type={"const": "text"},
        text=STRING,
        prompt_cache_breakpoint=nullable(breakpoint),  # cache_hints.py
    )
    content = {"anyOf": [STRING, array(text_part)]}
    tool_call = obj(
        ("id", "function"),
        id=STRING,
        function=obj(("name",), name=STRING, arguments={"anyOf": [STRING, OBJECT]}),
    )
    message = {
        "anyOf": [
            {
                **obj(
                    ("role", "content"),
                    role={"enum": ["system", "developer", "user"]},
                    content=content,
                ),
                "description": IMAGE_NOTE,
            },
            obj(
                ("role",),
                role={"const": "assistant"},
                content=nullable(content),
                tool_calls=nullable(array(tool_call)),
                reasoning_content=OPT_STRING,
                reasoning=OPT_STRING,
            ),
            obj(
                ("role", "tool_call_id"),
                role={"const": "tool"},
                tool_call_id=STRING,
                content=content,
            ),
        ]
    }
    response_format = {
        "anyOf": [
            obj(("type",), type={"enum": ["text", "json_object"]}),
            obj(
                ("type", "json_schema"),
                type={"const": "json_schema"},
                json_schema=obj(
                    ("name",),
                    name=STRING,
                    schema=OBJECT,
                    description=OPT_STRING,
                    strict=nullable(BOOLEAN),
                ),
            ),
        ]
    }
    scalars = {
        key: nullable({"type": "boolean" if kind is bool else "string"})
        for key, kind in SCALAR_PARAMS.items()
    }
    return {
        "type": "object",
        "required": ["model", "messages"],
        "description": "Unknown fields are accepted and ignored. Nothing is stored.",
        "properties": {
            **scalars,
            "model": NON_EMPTY_STRING,
            "messages": {**array(message), "minItems": 1},
            "tools": nullable(array(function_tool_schema())),
            "tool_choice": nullable(tool_choice_schema()),
            "response_format": nullable(response_format),
            "stream": nullable(BOOLEAN),
            "stream_options": nullable(obj(include_usage=nullable(BOOLEAN))),
            "max_tokens": nullable(integer(1)),
            "max_completion_tokens": nullable(integer(1)),
            **SAMPLING,
            "n": nullable(integer(1, MAX_N)),
            "logprobs": nullable(BOOLEAN),
            "top_logprobs": nullable(integer(0, MAX_TOP_LOGPROBS)),
            "reasoning_effort": OPT_STRING,
            "chat_template_kwargs": nullable(OBJECT),
            **prompt_cache_lifetimes(),
        },
        # `top_logprobs` needs `logprobs: true`.
        "if": {"required": ["top_logprobs"], "properties": {"top_logprobs": INTEGER}},
        "then": {"required": ["logprobs"], "properties": {"logprobs": {"const": True}}},
    }


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
