"""Encodes a CreateEmbeddingsResponse as OpenAI's `list` of `embedding` objects."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any

from mlx_responses.v1 import embeddings_service_pb2 as em


def vector_json(values: Sequence[float], encoding_format: str) -> list[float] | str:
    """A vector as floats, or as OpenAI's base64: the float32 values' little-endian bytes (the
    core's float32 values exactly, as the floats are)."""
    if encoding_format == "base64":
        return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")
    return list(values)


def embeddings_json(reply: em.CreateEmbeddingsResponse, encoding_format: str) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "object": "embedding",
                "index": item.index,
                "embedding": vector_json(item.values, encoding_format),
            }
            for item in reply.data
        ],
        "model": reply.model,
        "usage": {
            "prompt_tokens": reply.usage.prompt_tokens,
            "total_tokens": reply.usage.total_tokens,
        },
    }
