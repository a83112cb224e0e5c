"""The OpenAPI schemas and operations of legacy Completions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.completions import routes
from mlx_responses.http_facade.completions.protocol import FIELDS
from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import (
    INTEGER,
    NUMBER,
    STRING,
    Operation,
    Schema,
    array,
    nullable,
    obj,
    ref,
)
from mlx_responses.http_facade.kit.sampling import MAX_N


def operations() -> dict[Callable[..., Any], Operation]:
    return {
        routes.create_completion: Operation(
            "CompletionRequest",
            "Completion",
            streams=True,
            stream_event="CompletionStreamEvent",
            stream_done=True,
        ),
    }


def _best_of() -> Schema:
    """`best_of`, when given, equals `n` (1 when absent): no other value is supported."""
    same = [
        {"properties": {"n": {"const": n}, "best_of": {"const": n}}, "required": ["n"]}
        for n in range(1, MAX_N + 1)
    ]
    default = {
        "properties": {"n": {"type": "null"}, "best_of": {"const": 1}},
    }
    return {
        "if": {"required": ["best_of"], "properties": {"best_of": {"not": {"type": "null"}}}},
        "then": {"anyOf": [*same, default]},
    }


def _request() -> Schema:
    """What `completion_from_json` takes (the fuzz test holds them together)."""
    return request_schema(
        FIELDS,
        "Unknown fields are accepted and ignored. The prompt is raw text.",
        allOf=[
            _best_of(),
            {
                # `echo` with `logprobs` is not supported (no prompt logprobs).
                "if": {"required": ["logprobs"], "properties": {"logprobs": INTEGER}},
                "then": {"properties": {"echo": {"enum": [False, None]}}},
            },
        ],
    )


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
        "CompletionRequest": _request(),
        # A stream the core breaks off ends with an error frame (no [DONE]).
        "CompletionStreamEvent": {"anyOf": [ref("Completion"), ref("Error")]},
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
