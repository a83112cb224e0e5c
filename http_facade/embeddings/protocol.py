"""The Embeddings request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from mlx_responses.http_facade.kit.fields import Field, Fields
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.kit.openapi import NON_EMPTY_STRING, array, integer
from mlx_responses.http_facade.kit.sampling import MODEL, USER

MAX_INPUTS = 2048  # OpenAI's bound on inputs per request
MAX_DIMENSIONS = 1 << 20
TOKEN_ID_MAX = (1 << 31) - 1
ENCODING_FORMATS = ("float", "base64")
TOKEN_IDS = {**array(integer(0, TOKEN_ID_MAX)), "minItems": 1}

FIELDS = Fields(
    MODEL,
    Field(
        "input",
        "input",
        "A text, texts, token ids, or arrays of token ids.",
        required=True,
        schema={
            "anyOf": [
                NON_EMPTY_STRING,
                {**array(NON_EMPTY_STRING), "minItems": 1, "maxItems": MAX_INPUTS},
                TOKEN_IDS,
                {**array(TOKEN_IDS), "minItems": 1, "maxItems": MAX_INPUTS},
            ]
        },
    ),
    Field(
        "encoding_format",
        "enum",
        "Floats, or their float32 bytes in base64.",
        enum=ENCODING_FORMATS,
    ),
    Field(
        "dimensions",
        "integer",
        "Only for a model trained for shortened vectors (Matryoshka): the first `dimensions` "
        "components, renormalised; other models take only their own width.",
        "dimensions",
        minimum=1,
        maximum=MAX_DIMENSIONS,
    ),
    USER,
    Field("keep_alive", "keep_alive", schema=KEEP_ALIVE_SCHEMA),
)
