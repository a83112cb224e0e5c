"""A loaded embedding model: its inputs checked and tokenized, its vectors cut to `dimensions`.

The pool holds it where it holds a generation model's runtime (same lifecycle: loaded on
demand, keep_alive, --max-loaded-models, the memory budget), and refuses generation requests
for it before they reach a runtime (pool.py, `acquire`), so none of ModelRuntime's generation
entry points runs on one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mlx_responses.service.engine.embedding.load import EmbeddingShape
from mlx_responses.service.engine.embedding.worker import EmbeddingWorker
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.requests import EngineStoppedError, QueueFullError
from mlx_responses.service.errors import Reason, ServiceError, invalid
from mlx_responses.service.models.runtime import ModelRuntime

from mlx_responses.v1 import embeddings_service_pb2 as em


class EmbeddingRuntime(ModelRuntime):
    """An embedding model's tokenizer and engine, shared by every request to it."""

    embeds = True

    def __init__(self, loaded: LoadedModel, worker: EmbeddingWorker) -> None:
        # NOTE: not ModelRuntime.__init__: no chat template, tool format or grammars. The pool
        # reads `loaded` (the weights' bytes) and stops and unloads `worker` (ModelThread's
        # lifecycle); nothing else of a generation runtime is reached.
        self.loaded = loaded
        self.worker = worker  # type: ignore[assignment]
        self.embedder = worker
        assert worker.shape is not None
        self.shape: EmbeddingShape = worker.shape

    async def warm_up(self) -> float:
        """The load already ran one forward (load.py's probe)."""
        return 0.0

    # --- inputs --------------------------------------------------------------------------
    def rows(self, inputs: Sequence[em.EmbeddingInput]) -> list[list[int]]:
        """Each input's tokens: a text through the tokenizer (its special tokens added), token
        ids as they are; a 400 naming `input` for an empty one, an id outside the vocabulary or
        one longer than the model's context."""
        if not inputs:
            raise invalid("'input' must not be empty.", "input", "invalid_value")
        tokenizer = self.loaded.tokenizer._tokenizer
        vocab = self.loaded.vocab_size or len(tokenizer)
        rows: list[list[int]] = []
        for i, item in enumerate(inputs):
            if item.WhichOneof("kind") == "tokens":
                row = list(item.tokens.ids)
                bad = next((t for t in row if not 0 <= t < vocab), None)
                if bad is not None:
                    raise invalid(
                        f"Invalid 'input[{i}]': token id {bad} is outside the model's "
                        f"vocabulary (0 to {vocab - 1}).",
                        "input",
                        "invalid_value",
                    )
            else:
                row = list(tokenizer(item.text)["input_ids"]) if item.text else []
            if not row:
                raise invalid(
                    f"Invalid 'input[{i}]': an input must not be empty.", "input", "invalid_value"
                )
            context = self.loaded.context_length
            if len(row) > context:
                raise invalid(
                    f"This model's maximum context length is {context} tokens, however input "
                    f"{i} has {len(row)} tokens. Please reduce the length of the input.",
                    "input",
                    "context_length_exceeded",
                )
            rows.append(row)
        return rows

    def width(self, request: em.CreateEmbeddingsRequest) -> int:
        """The vector width the request asks for: every dimension, or `dimensions` where the
        model was trained for cut vectors (Matryoshka); else a 400 naming `dimensions`."""
        full = self.shape.dimensions
        if not request.HasField("dimensions") or request.dimensions == full:
            return full
        low = self.shape.matryoshka_min
        if low is None:
            raise invalid(
                f"The model '{self.loaded.alias}' does not support 'dimensions' other than "
                f"{full} (it was not trained for shortened vectors).",
                "dimensions",
                "unsupported_value",
            )
        if not low <= request.dimensions <= full:
            raise invalid(
                f"Invalid 'dimensions': {request.dimensions}; the model '{self.loaded.alias}' "
                f"takes {low} to {full}.",
                "dimensions",
                "invalid_value",
            )
        return request.dimensions

    # --- embedding -----------------------------------------------------------------------
    async def embed(self, request: em.CreateEmbeddingsRequest) -> em.CreateEmbeddingsResponse:
        """Every input's vector (one batch with whatever else is queued), cut and renormalised
        to the asked width."""
        width = self.width(request)
        rows = self.rows(request.inputs)
        try:
            future = self.embedder.submit(rows)
        except QueueFullError as exc:
            self.embedder.refused("queue_full")
            raise ServiceError(
                Reason.QUEUE_FULL, "The embedding queue is full; retry later."
            ) from exc
        except EngineStoppedError as exc:
            raise ServiceError(Reason.NOT_READY, str(exc)) from exc
        vectors = truncated(await future, width)
        tokens = sum(len(r) for r in rows)
        return em.CreateEmbeddingsResponse(
            model=self.loaded.alias,
            data=[em.Embedding(index=i, values=v.tolist()) for i, v in enumerate(vectors)],
            usage=em.EmbeddingsUsage(prompt_tokens=tokens, total_tokens=tokens),
        )


def truncated(vectors: np.ndarray, width: int) -> np.ndarray:
    """The first `width` components of each row, back to unit length (Matryoshka)."""
    if width >= vectors.shape[1]:
        return vectors
    cut = vectors[:, :width]
    norms = np.maximum(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12)
    return (cut / norms).astype(np.float32)
