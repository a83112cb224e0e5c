"""The legacy Completions request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from mlx_responses.http_facade.kit.fields import Fields
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
    "prompt!: prompt = P | Raw text to continue, or up to 16 texts (each answered `n` times).",
    "suffix: null | Insertion is not supported.",
    f"max_tokens: integer 1.. ->max_output_tokens | Output cap (default {DEFAULT_MAX_TOKENS}).",
    *SAMPLING,
    N,
    f"best_of: integer 1..{MAX_N} core | Only `n` itself.",
    f"logprobs: integer 0..{MAX_LOGPROBS} | Alternatives per token.",
    "echo: boolean | The prompt leads the text.",
    STREAM,
    STREAM_OPTIONS,
    USER,
    P={"anyOf": [PROMPT, {**array(PROMPT), "minItems": 1, "maxItems": MAX_PROMPTS}]},
)
