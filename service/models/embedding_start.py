"""Starts an embedding model: its engine thread (mlx-embeddings loads it there) and runtime."""

from __future__ import annotations

from pathlib import Path

from mlx_responses.service.config import ConfigError, Settings
from mlx_responses.service.engine.embedding.worker import EmbeddingWorker
from mlx_responses.service.engine.memory.budget import MemoryBudget
from mlx_responses.service.models.embedding_runtime import EmbeddingRuntime


async def start_embedding(
    model_id: str, folder: Path, settings: Settings, memory: MemoryBudget | None
) -> EmbeddingRuntime:
    """The started runtime of the embedding model in `folder` (the [embeddings] extra)."""
    try:
        import mlx_embeddings  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"--model {folder} is an embedding model: install mlx-responses[embeddings] "
            "(mlx-embeddings) to serve it"
        ) from exc
    from mlx_responses.service.engine.embedding.load import load_embedding_model

    worker = EmbeddingWorker(
        lambda: load_embedding_model(folder, model_id),
        name=f"mlx-embedding-{model_id}",
        max_queued_requests=settings.max_batch_size + settings.max_queued_requests,
        memory=memory,
    )
    loaded = await worker.start()
    return EmbeddingRuntime(loaded, worker)
