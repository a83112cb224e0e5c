"""Queues a prompt on the engine worker, refusing with the core's errors before anything runs."""

from __future__ import annotations

from collections.abc import Sequence

from mlx_responses.service.engine.requests import (
    EngineStoppedError,
    LogitsProcessor,
    QueueFullError,
    SamplingParams,
)
from mlx_responses.service.engine.worker import EngineWorker, GenerationStream
from mlx_responses.service.errors import Reason, ServiceError


def submit(
    worker: EngineWorker,
    tokens: Sequence[int],
    sampling: SamplingParams,
    logits_processors: Sequence[LogitsProcessor] = (),
) -> GenerationStream:
    """A full queue is a 503 (QUEUE_FULL); a stopped worker is NOT_READY."""
    try:
        return worker.submit(tokens, sampling, logits_processors)
    except QueueFullError as exc:
        raise ServiceError(Reason.QUEUE_FULL, "The generation queue is full; retry later.") from exc
    except EngineStoppedError as exc:
        raise ServiceError(Reason.NOT_READY, str(exc)) from exc
