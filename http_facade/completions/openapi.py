"""The OpenAPI schemas and operations of legacy Completions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.completions import routes
from mlx_responses.http_facade.completions.protocol import FIELDS
from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import INTEGER, Operation, Schema, ts
from mlx_responses.http_facade.kit.sampling import MAX_N


def operations() -> dict[Callable[..., Any], Operation]:
    stream: dict[str, Any] = {
        "streams": True,
        "stream_event": "CompletionStreamEvent",
        "stream_done": True,
    }
    return {routes.create_completion: Operation("CompletionRequest", "Completion", **stream)}


def _best_of() -> Schema:
    """`best_of`, when given, equals `n` (1 when absent): no other value is supported."""
    same = [
        {"properties": {"n": {"const": n}, "best_of": {"const": n}}, "required": ["n"]}
        for n in range(1, MAX_N + 1)
    ]
    default = {"properties": {"n": {"type": "null"}, "best_of": {"const": 1}}}
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
    choice = (
        "{index: integer, text: string, logprobs: ?{tokens: string[], token_logprobs: number[],"
        " top_logprobs: {[k]: number}[], text_offset: integer[]},"
        " finish_reason: ?('stop'|'length')}"
    )
    return {
        "CompletionRequest": _request(),
        # A stream the core breaks off ends with an error frame (no [DONE]).
        "CompletionStreamEvent": ts("$Completion | $Error"),
        "Completion": ts(
            "{id: string, object: 'text_completion', created: integer, model: string,"
            f" choices: {choice}[], usage?: {{prompt_tokens: integer, completion_tokens: integer,"
            " total_tokens: integer}}"
        ),
    }
