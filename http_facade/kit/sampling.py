"""The sampling fields Chat, Completions and Anthropic share (`stop`, `seed`, `n`, the output
cap, `stream_options`, `chat_template_kwargs`): their decoders and their OpenAPI schemas."""

from __future__ import annotations

import json
from typing import Any

from mlx_responses.http_facade.kit.decode import expect, flag, integer, number
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA, read_keep_alive
from mlx_responses.http_facade.kit.openapi import Schema, nullable
from mlx_responses.http_facade.kit.openapi import integer as integer_schema
from mlx_responses.http_facade.kit.openapi import number as number_schema
from mlx_responses.http_facade.kit.openapi import stop_sequences as stop_schema
from mlx_responses.service.limits import MAX_STOP_SEQUENCES

from mlx_responses.v1 import responses_pb2 as pb

MAX_N = 16

# `sampling()`'s fields, shared with legacy completions, with the core's ranges.
SAMPLING: dict[str, Schema] = {
    "temperature": nullable(number_schema(0, 2)),
    "top_p": nullable(number_schema(0, 1)),
    "presence_penalty": nullable(number_schema(-2, 2)),
    "frequency_penalty": nullable(number_schema(-2, 2)),
    "stop": nullable(stop_schema(MAX_STOP_SEQUENCES)),
    "seed": nullable(integer_schema()),
    "keep_alive": KEEP_ALIVE_SCHEMA,
}


def stop_sequences(value: Any, param: str) -> list[str]:
    """`stop`: a string or an array of strings."""
    if isinstance(value, str):
        return [value]
    expect(value, list, param, "a string or an array of strings")
    return [expect(s, str, f"{param}[{i}]", "a string") for i, s in enumerate(value)]


def template_kwargs(body: dict[str, Any], **extra: Any) -> str | None:
    """`chat_template_kwargs` (vLLM's extension) with `extra` on top, as JSON text."""
    kwargs: dict[str, Any] = {}
    if body.get("chat_template_kwargs") is not None:
        kwargs.update(
            expect(body["chat_template_kwargs"], dict, "chat_template_kwargs", "an object")
        )
    kwargs.update({k: v for k, v in extra.items() if v is not None})
    return json.dumps(kwargs) if kwargs else None


def max_tokens(body: dict[str, Any], *names: str) -> int | None:
    """The first of `names` present, as an output cap of at least 1 (each present is checked)."""
    caps = []
    for name in names:
        if body.get(name) is not None:
            value = integer(body[name], name)
            if value < 1:
                raise invalid(
                    f"Invalid '{name}': {value}; must be at least 1.", name, "invalid_value"
                )
            caps.append(value)
    return caps[0] if caps else None


def sampling(body: dict[str, Any], params: pb.CreateResponseParams) -> None:
    """`stop`, `seed`, `n`-independent sampling fields and `keep_alive`, shared by chat and
    completions."""
    if body.get("stop") is not None:
        params.stop.extend(stop_sequences(body["stop"], "stop"))
    if body.get("seed") is not None:
        params.seed = integer(body["seed"], "seed")
    read_keep_alive(body, params)
    for key in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        if body.get(key) is not None:
            setattr(params, key, number(body[key], key))


def choices(body: dict[str, Any]) -> int:
    """`n`: how many choices, 1 to MAX_N."""
    if body.get("n") is None:
        return 1
    n = integer(body["n"], "n")
    if not 1 <= n <= MAX_N:
        raise invalid(f"Invalid 'n': {n}; must be between 1 and {MAX_N}.", "n", "invalid_value")
    return n


def include_usage(body: dict[str, Any]) -> bool:
    """`stream_options.include_usage`."""
    options = body.get("stream_options")
    if options is None:
        return False
    expect(options, dict, "stream_options", "an object")
    return flag(options, "include_usage", "stream_options.include_usage")
