"""The OpenAPI schemas and operation of Embeddings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.embeddings import routes
from mlx_responses.http_facade.embeddings.protocol import FIELDS
from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import (
    INTEGER,
    NUMBER,
    STRING,
    Operation,
    Schema,
    array,
    obj,
)


def operations() -> dict[Callable[..., Any], Operation]:
    return {routes.create_embeddings: Operation("EmbeddingsRequest", "EmbeddingList")}


def _request() -> Schema:
    """What `embeddings_from_json` takes (the fuzz test holds them together)."""
    return request_schema(FIELDS, "Unknown fields are accepted and ignored.")


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
