"""The request fields Chat, Completions and Anthropic share, declared once (kit/fields.py), and
the decoders of the structured ones (`stop`, `stream_options`, `chat_template_kwargs`)."""

from __future__ import annotations

import json
from typing import Any

from mlx_responses.http_facade.kit.decode import expect, flag
from mlx_responses.http_facade.kit.fields import Field
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA, read_keep_alive
from mlx_responses.http_facade.kit.openapi import BOOLEAN, nullable, obj
from mlx_responses.http_facade.kit.openapi import stop_sequences as stop_schema
from mlx_responses.service.limits import MAX_STOP_SEQUENCES

from mlx_responses.v1 import responses_pb2 as pb

MAX_N = 16

MODEL = Field("model", "string", "The model to answer.", to="model", required=True)
STREAM = Field("stream", "boolean", "Whether the answer streams as server-sent events.")
USER = Field("user", "string", "An id of the end user, recorded with the turn.", to="user")
# Responses' and Chat's: who asks, which prefix, which tier, how many calls at once.
OPENAI_SCALARS = (
    USER,
    Field("safety_identifier", "string", "An id of the end user, recorded.", "safety_identifier"),
    Field(
        "prompt_cache_key", "string", "Routes and names a shared prompt prefix.", "prompt_cache_key"
    ),
    Field("service_tier", "string", "Echoed.", "service_tier"),
    Field(
        "parallel_tool_calls", "boolean", "Several tool calls in one turn.", "parallel_tool_calls"
    ),
)
N = Field("n", "integer", "How many choices to generate.", minimum=1, maximum=MAX_N)
STREAM_OPTIONS = Field(
    "stream_options",
    "object",
    "`include_usage`: a last chunk carries the usage.",
    schema=obj(include_usage=nullable(BOOLEAN)),
)
TEMPLATE_KWARGS = Field(
    "chat_template_kwargs", "object", "Extra arguments of the model's chat template (vLLM's)."
)
# The core enforces the ranges of the sampling fields (the façade checks type and proto range).
SAMPLING = (
    Field("temperature", "number", "Sampling temperature.", "temperature", 0, 2, checked=False),
    Field("top_p", "number", "Nucleus sampling mass.", "top_p", 0, 1, checked=False),
    Field("presence_penalty", "number", "", "presence_penalty", -2, 2, checked=False),
    Field("frequency_penalty", "number", "", "frequency_penalty", -2, 2, checked=False),
    Field(
        "stop",
        "stop",
        "Where generation stops: a string or up to "
        f"{MAX_STOP_SEQUENCES} strings (not in the output).",
        schema=stop_schema(MAX_STOP_SEQUENCES),
    ),
    Field("seed", "integer", "Makes sampling reproducible.", "seed"),
    Field("keep_alive", "keep_alive", schema=KEEP_ALIVE_SCHEMA),
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
