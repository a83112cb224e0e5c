"""Decodes an Embeddings body (OpenAI's shape) into a CreateEmbeddingsRequest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.keep_alive import keep_alive_from

from mlx_responses.v1 import embeddings_service_pb2 as em

MAX_INPUTS = 2048  # OpenAI's bound on inputs per request
MAX_DIMENSIONS = 1 << 20
TOKEN_ID_MAX = (1 << 31) - 1
ENCODING_FORMATS = ("float", "base64")

INPUT_HELP = (
    "expected a non-empty string, an array of non-empty strings, an array of token ids or an "
    "array of non-empty token-id arrays"
)


@dataclass(frozen=True)
class EmbeddingsRequest:
    """The core's request and how the answer's vectors are written."""

    request: em.CreateEmbeddingsRequest
    encoding_format: str = "float"


def _token_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= TOKEN_ID_MAX


def _token_row(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_token_id(t) for t in value)


def inputs_from_json(value: Any) -> list[em.EmbeddingInput]:
    """`input` as OpenAI takes it: a string, strings, token ids, or arrays of token ids."""
    if isinstance(value, str) and value:
        return [em.EmbeddingInput(text=value)]
    if _token_row(value):
        return [em.EmbeddingInput(tokens=em.TokenIds(ids=value))]
    if isinstance(value, list) and value:
        if len(value) > MAX_INPUTS:
            raise invalid(
                f"Invalid 'input': at most {MAX_INPUTS} inputs per request, got {len(value)}.",
                "input",
                "invalid_value",
            )
        if all(isinstance(v, str) and v for v in value):
            return [em.EmbeddingInput(text=v) for v in value]
        if all(_token_row(v) for v in value):
            return [em.EmbeddingInput(tokens=em.TokenIds(ids=v)) for v in value]
    raise invalid(f"Invalid 'input': {INPUT_HELP}.", "input", "invalid_value")


def embeddings_from_json(body: Any) -> EmbeddingsRequest:
    """An Embeddings body; unknown fields are ignored (as OpenAI's SDKs may send more)."""
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.", None, "invalid_type")
    for name in ("model", "input"):
        if body.get(name) is None:
            raise invalid(
                f"Missing required parameter: '{name}'.", name, "missing_required_parameter"
            )
    model = body["model"]
    if not isinstance(model, str) or not model:
        raise invalid("Invalid 'model': expected a non-empty string.", "model", "invalid_type")
    request = em.CreateEmbeddingsRequest(model=model, inputs=inputs_from_json(body["input"]))
    encoding = body.get("encoding_format")
    if encoding is None:
        encoding = "float"
    if encoding not in ENCODING_FORMATS:
        raise invalid(
            f"Invalid 'encoding_format': {encoding!r}; expected 'float' or 'base64'.",
            "encoding_format",
            "invalid_value",
        )
    dimensions = body.get("dimensions")
    if dimensions is not None:
        if isinstance(dimensions, float) and dimensions.is_integer():
            dimensions = int(dimensions)
        if not isinstance(dimensions, int) or isinstance(dimensions, bool):
            raise invalid(
                "Invalid type for 'dimensions': expected an integer.", "dimensions", "invalid_type"
            )
        if not 1 <= dimensions <= MAX_DIMENSIONS:
            raise invalid(
                f"Invalid 'dimensions': {dimensions}; must be at least 1.",
                "dimensions",
                "invalid_value",
            )
        request.dimensions = dimensions
    user = body.get("user")
    if user is not None:
        if not isinstance(user, str):
            raise invalid("Invalid type for 'user': expected a string.", "user", "invalid_type")
        request.user = user
    keep = keep_alive_from(body)
    if keep is not None:
        request.keep_alive_seconds = keep
    return EmbeddingsRequest(request, encoding)
