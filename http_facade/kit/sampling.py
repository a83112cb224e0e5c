"""The request fields Chat, Completions and Anthropic share, declared once (kit/fields.py), and
the decoders of the structured ones (`stop`, `stream_options`, `chat_template_kwargs`)."""

from __future__ import annotations

import json
from typing import Any

from mlx_responses.http_facade.kit.decode import expect, flag
from mlx_responses.http_facade.kit.fields import row
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA, read_keep_alive
from mlx_responses.http_facade.kit.openapi import stop_sequences as stop_schema
from mlx_responses.http_facade.kit.openapi import ts
from mlx_responses.service.limits import MAX_STOP_SEQUENCES

from mlx_responses.v1 import responses_pb2 as pb

MAX_N = 16

MODEL = row("model!: string -> | The model to answer.")
STREAM = row("stream: boolean -> | Whether the answer streams as server-sent events.")
USER = row("user: string -> | An id of the end user, recorded with the turn.")
# Responses' and Chat's: who asks, which prefix, which tier, how many calls at once.
OPENAI_SCALARS = (
    USER,
    row("safety_identifier: string -> | An id of the end user, recorded."),
    row("prompt_cache_key: string -> | Routes and names a shared prompt prefix."),
    row("service_tier: string -> | Echoed."),
    row("parallel_tool_calls: boolean -> | Several tool calls in one turn."),
)
N = row(f"n: integer 1..{MAX_N} | How many choices to generate.")
STREAM_OPTIONS = row(
    "stream_options: object = S | `include_usage`: a last chunk carries the usage.",
    S=ts("{include_usage?: ?boolean}"),
)
TEMPLATE_KWARGS = row(
    "chat_template_kwargs: object | Extra arguments of the model's chat template (vLLM's)."
)
# The core enforces the ranges of the sampling fields (the façade checks type and proto range).
SAMPLING = (
    row("temperature: number 0..2 core -> | Sampling temperature."),
    row("top_p: number 0..1 core -> | Nucleus sampling mass."),
    row("presence_penalty: number -2..2 core ->"),
    row("frequency_penalty: number -2..2 core ->"),
    row(
        f"stop: stop = S | Where generation stops: a string or up to {MAX_STOP_SEQUENCES} strings"
        " (not in the output).",
        S=stop_schema(MAX_STOP_SEQUENCES),
    ),
    row("seed: integer -> | Makes sampling reproducible."),
    row("keep_alive: keep_alive = S", S=KEEP_ALIVE_SCHEMA),
)


def stop_sequences(value: Any, param: str) -> list[str]:
    """`stop`: a string or an array of strings."""
    if isinstance(value, str):
        return [value]
    expect(value, list, param, "a string or an array of strings")
    return [expect(s, str, f"{param}[{i}]", "a string") for i, s in enumerate(value)]


def template_kwargs(body: dict[str, Any], **extra: Any) -> str | None:
    """`chat_template_kwargs` (vLLM's extension) with `extra` on top, as JSON text."""
    kwargs: dict[str, Any] = dict(TEMPLATE_KWARGS.read(body) or {})
    kwargs.update({k: v for k, v in extra.items() if v is not None})
    return json.dumps(kwargs) if kwargs else None


def stop_and_keep_alive(body: dict[str, Any], params: pb.CreateResponseParams) -> None:
    """The structured SAMPLING fields onto `params` (`fill` sets the others)."""
    if body.get("stop") is not None:
        params.stop.extend(stop_sequences(body["stop"], "stop"))
    read_keep_alive(body, params)


def include_usage(body: dict[str, Any]) -> bool:
    """`stream_options.include_usage`."""
    options = body.get("stream_options")
    if options is None:
        return False
    expect(options, dict, "stream_options", "an object")
    return flag(options, "include_usage", "stream_options.include_usage")
