"""The OpenAPI schemas and operation of Embeddings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.embeddings import routes
from mlx_responses.http_facade.embeddings.to_proto import (
    ENCODING_FORMATS,
    MAX_DIMENSIONS,
    MAX_INPUTS,
    TOKEN_ID_MAX,
)
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.kit.openapi import (
    INTEGER,
    NON_EMPTY_STRING,
    NUMBER,
    OPT_STRING,
    STRING,
    Operation,
    Schema,
    array,
    integer,
    nullable,
    obj,
)


def operations() -> dict[Callable[..., Any], Operation]:
    return {routes.create_embeddings: Operation("EmbeddingsRequest", "EmbeddingList")}


def _request() -> Schema:
    """What `embeddings_from_json` takes (the fuzz test holds them together)."""
    token_ids = {**array(integer(0, TOKEN_ID_MAX)), "minItems": 1}
    return {
        "type": "object",
        "required": ["model", "input"],
        "description": "Unknown fields are accepted and ignored.",
        "properties": {
            "model": NON_EMPTY_STRING,
            "input": {
                "anyOf": [
                    NON_EMPTY_STRING,
                    {**array(NON_EMPTY_STRING), "minItems": 1, "maxItems": MAX_INPUTS},
                    token_ids,
                    {**array(token_ids), "minItems": 1, "maxItems": MAX_INPUTS},
                ],
                "description": "A text, texts, token ids, or arrays of token ids.",
            },
            "encoding_format": nullable({"enum": list(ENCODING_FORMATS)}),
            "dimensions": {
                **nullable(integer(1, MAX_DIMENSIONS)),
                "description": "Only for a model trained for shortened vectors (Matryoshka): "
                "the first `dimensions` components, renormalised; other models take only "
                "their own width.",
            },
            "user": OPT_STRING,
            "keep_alive": KEEP_ALIVE_SCHEMA,
        },
    }


def schemas() -> dict[str, Schema]:
    embedding = obj(
        ("object", "index", "embedding"),
        object={"const": "embedding"},
        index=INTEGER,
        embedding={
            "anyOf": [array(NUMBER), STRING],
            "description": "Floats, or (encoding_format base64) the little-endian float32 "
            "bytes in base64.",
        },
    )
    return {
        "EmbeddingsRequest": _request(),
        "EmbeddingList": obj(
            ("object", "data", "model", "usage"),
            object={"const": "list"},
            data=array(embedding),
            model=STRING,
            usage=obj(
                ("prompt_tokens", "total_tokens"), prompt_tokens=INTEGER, total_tokens=INTEGER
            ),
        ),
    }
