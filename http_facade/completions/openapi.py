"""The OpenAPI schemas and operations of legacy Completions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.completions import routes
from mlx_responses.http_facade.completions.to_proto import MAX_LOGPROBS, MAX_PROMPTS
from mlx_responses.http_facade.openapi_kit import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    OPT_STRING,
    STRING,
    Operation,
    Schema,
    array,
    nullable,
    obj,
)


def operations() -> dict[Callable[..., Any], Operation]:
    return {
        routes.create_completion: Operation(
            "CompletionRequest", "Completion", streams=True, stream_event="Completion"
        ),
    }


def schemas() -> dict[str, Schema]:
    logprobs = nullable(
        obj(
            ("tokens", "token_logprobs", "top_logprobs", "text_offset"),
            tokens=array(STRING),
            token_logprobs=array(NUMBER),
            top_logprobs=array({"type": "object", "additionalProperties": NUMBER}),
            text_offset=array(INTEGER),
        )
    )
    choice = obj(
        ("index", "text", "logprobs", "finish_reason"),
        index=INTEGER,
        text=STRING,
        logprobs=logprobs,
        finish_reason=nullable({"enum": ["stop", "length"]}),
    )
    return {
        "CompletionRequest": {
            "type": "object",
            "required": ["model", "prompt"],
            "description": "Unknown fields are accepted and ignored. The prompt is raw text.",
            "properties": {
                "model": STRING,
                "prompt": {
                    "anyOf": [STRING, {**array(STRING), "minItems": 1, "maxItems": MAX_PROMPTS}]
                },
                "max_tokens": nullable({"type": "integer", "minimum": 1}),
                "temperature": nullable(NUMBER),
                "top_p": nullable(NUMBER),
                "presence_penalty": nullable(NUMBER),
                "frequency_penalty": nullable(NUMBER),
                "n": nullable({"type": "integer", "minimum": 1}),
                "stop": nullable({"anyOf": [STRING, array(STRING)]}),
                "seed": nullable(INTEGER),
                "logprobs": nullable({"type": "integer", "minimum": 0, "maximum": MAX_LOGPROBS}),
                "echo": nullable(BOOLEAN),
                "stream": nullable(BOOLEAN),
                "stream_options": nullable(obj(include_usage=nullable(BOOLEAN))),
                "user": OPT_STRING,
            },
        },
        "Completion": obj(
            ("id", "object", "created", "model", "choices"),
            id=STRING,
            object={"const": "text_completion"},
            created=INTEGER,
            model=STRING,
            choices=array(choice),
            usage=obj(
                ("prompt_tokens", "completion_tokens", "total_tokens"),
                prompt_tokens=INTEGER,
                completion_tokens=INTEGER,
                total_tokens=INTEGER,
            ),
        ),
    }
