"""Queues a prompt on the engine worker, refusing with the core's errors before anything runs."""

from __future__ import annotations

from collections.abc import Sequence

from service.engine.requests import (
    EngineStoppedError,
    LogitsProcessor,
    QueueFullError,
    SamplingParams,
)
from service.engine.worker import EngineWorker, GenerationStream
from service.errors import Reason, ServiceError


def queue_full() -> ServiceError:
    """The 503 of a full generation queue."""
    return ServiceError(Reason.QUEUE_FULL, "The generation queue is full; retry later.")


def check_room(worker: EngineWorker) -> None:
    """A 503 (QUEUE_FULL) now if a submit now would be refused for a full queue."""
    if not worker.has_room():
        raise queue_full()


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
        raise queue_full() from exc
    except EngineStoppedError as exc:
        raise ServiceError(Reason.NOT_READY, str(exc)) from exc
