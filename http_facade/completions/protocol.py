"""The legacy Completions request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from mlx_responses.http_facade.kit.fields import Field, Fields
from mlx_responses.http_facade.kit.openapi import array
from mlx_responses.http_facade.kit.sampling import (
    MAX_N,
    MODEL,
    SAMPLING,
    STREAM,
    STREAM_OPTIONS,
    USER,
    N,
)

DEFAULT_MAX_TOKENS = 16  # the legacy API's own default
MAX_LOGPROBS = 5
MAX_PROMPTS = 16
PROMPT = {"type": "string", "minLength": 1}

FIELDS = Fields(
    MODEL,
    Field(
        "prompt",
        "prompt",
        "Raw text to continue, or up to 16 texts (each answered `n` times).",
        required=True,
        schema={"anyOf": [PROMPT, {**array(PROMPT), "minItems": 1, "maxItems": MAX_PROMPTS}]},
    ),
    Field("suffix", "null", "Insertion is not supported."),
    Field(
        "max_tokens",
        "integer",
        f"Output cap (default {DEFAULT_MAX_TOKENS}).",
        "max_output_tokens",
        minimum=1,
    ),
    *SAMPLING,
    N,
    Field("best_of", "integer", "Only `n` itself.", minimum=1, maximum=MAX_N, checked=False),
    Field("logprobs", "integer", "Alternatives per token.", minimum=0, maximum=MAX_LOGPROBS),
    Field("echo", "boolean", "The prompt leads the text."),
    STREAM,
    STREAM_OPTIONS,
    USER,
)
