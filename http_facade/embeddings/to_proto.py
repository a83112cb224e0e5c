"""Decodes an Embeddings body (OpenAI's shape) into a CreateEmbeddingsRequest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlx_responses.http_facade.embeddings.protocol import FIELDS, MAX_INPUTS, TOKEN_ID_MAX
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.keep_alive import keep_alive_from

from mlx_responses.v1 import embeddings_service_pb2 as em

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
    """An Embeddings body (embeddings/protocol.py declares it); unknown fields are ignored (as
    OpenAI's SDKs may send more)."""
    request = em.CreateEmbeddingsRequest()
    body, values = FIELDS.decode(body, request)
    if not values.get("model"):
        raise invalid("Invalid 'model': expected a non-empty string.", "model", "invalid_type")
    request.inputs.extend(inputs_from_json(body["input"]))
    keep = keep_alive_from(body)
    if keep is not None:
        request.keep_alive_seconds = keep
    return EmbeddingsRequest(request, values.get("encoding_format") or "float")
