"""The OpenAPI schemas and operations of Chat Completions and legacy Completions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.chat import routes
from mlx_responses.http_facade.chat.to_proto import MAX_N, MESSAGE_ROLES
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

FINISH_REASONS = ["stop", "length", "tool_calls"]


def operations() -> dict[Callable[..., Any], Operation]:
    return {
        routes.create_chat_completion: Operation(
            "ChatCompletionRequest",
            "ChatCompletion",
            streams=True,
            stream_event="ChatCompletionChunk",
        ),
    }


def _request() -> Schema:
    text_part = obj(("type", "text"), type={"const": "text"}, text=STRING)
    content = nullable({"anyOf": [STRING, array(text_part)]})
    tool_call = obj(
        ("id", "function"),
        id=STRING,
        type={"const": "function"},
        function=obj(("name",), name=STRING, arguments={"anyOf": [STRING, OBJECT]}),
    )
    message = obj(
        ("role",),
        role={"enum": list(MESSAGE_ROLES)},
        content=content,
        name=OPT_STRING,
        tool_calls=nullable(array(tool_call)),
        tool_call_id=OPT_STRING,
        reasoning_content=OPT_STRING,
    )
    function = obj(
        ("name",),
        name=STRING,
        description=OPT_STRING,
        parameters=nullable(OBJECT),
        strict=nullable(BOOLEAN),
    )
    tool = obj(("function",), type={"const": "function"}, function=function)
    tool_choice = {
        "anyOf": [
            {"enum": ["none", "auto", "required"]},
            obj(
                ("type", "function"),
                type={"const": "function"},
                function=obj(("name",), name=STRING),
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
    stop = nullable({"anyOf": [STRING, array(STRING)]})
    return {
        "type": "object",
        "required": ["model", "messages"],
        "description": "Unknown fields are accepted and ignored. Nothing is stored.",
        "properties": {
            "model": STRING,
            "messages": {**array(message), "minItems": 1},
            "tools": nullable(array(tool)),
            "tool_choice": nullable(tool_choice),
            "parallel_tool_calls": nullable(BOOLEAN),
            "response_format": nullable(response_format),
            "stream": nullable(BOOLEAN),
            "stream_options": nullable(obj(include_usage=nullable(BOOLEAN))),
            "max_tokens": nullable({"type": "integer", "minimum": 1}),
            "max_completion_tokens": nullable({"type": "integer", "minimum": 1}),
            "temperature": nullable(NUMBER),
            "top_p": nullable(NUMBER),
            "presence_penalty": nullable(NUMBER),
            "frequency_penalty": nullable(NUMBER),
            "stop": stop,
            "seed": nullable(INTEGER),
            "n": nullable({"type": "integer", "minimum": 1, "maximum": MAX_N}),
            "logprobs": nullable(BOOLEAN),
            "top_logprobs": nullable({"type": "integer", "minimum": 0, "maximum": 20}),
            "reasoning_effort": OPT_STRING,
            "user": OPT_STRING,
            "chat_template_kwargs": nullable(OBJECT),
        },
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
        prompt_tokens_details=obj(("cached_tokens",), cached_tokens=INTEGER),
        completion_tokens_details=obj(("reasoning_tokens",), reasoning_tokens=INTEGER),
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
        "ChatCompletionChunk": obj(
            ("id", "object", "created", "model", "choices"),
            object={"const": "chat.completion.chunk"},
            choices=array(chunk_choice),
            usage=ref("ChatUsage"),
            **common,
        ),
    }
