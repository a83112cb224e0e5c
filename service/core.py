"""The composition root of the core: model, engine worker, stores and the generator."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from service.config import Settings
from service.engine.blas import blas_in_use
from service.errors import Reason, ServiceError
from service.metrics import CoreMetrics
from service.model_source import resolve_model
from service.stores.base import ConversationStore, JobBoard, ResponseStore
from service.stores.select import Stores, open_stores

if TYPE_CHECKING:  # the generator imports MLX; the façade must be able to skip it
    from service.generation import ResponseGenerator
    from service.jobs import JobManager

log = logging.getLogger(__name__)


@dataclass
class Core:
    """Everything the servicers delegate to; the generator exists once the model is loaded."""

    settings: Settings
    responses: ResponseStore
    conversations: ConversationStore
    board: JobBoard
    close_stores: Callable[[], Awaitable[None]] | None = None
    _generator: ResponseGenerator | None = None
    _jobs: JobManager | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    metrics: CoreMetrics = field(default_factory=CoreMetrics)
    draining: bool = False  # set on SIGTERM: new calls are refused (service/shutdown.py)

    @classmethod
    def with_stores(cls, settings: Settings, stores: Stores) -> Core:
        """A core over the given stores (it closes them when it closes)."""
        return cls(
            settings=settings,
            responses=stores.responses,
            conversations=stores.conversations,
            board=stores.board,
            close_stores=stores.close,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Core:
        """A core over the backend `--store` selects (memory unless a redis:// URL is given)."""
        return cls.with_stores(settings, open_stores(settings))

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def generator(self) -> ResponseGenerator:
        """The response generator; NOT_READY (503) until the model is loaded."""
        if self._generator is None:
            raise ServiceError(Reason.NOT_READY, "The model is still loading; retry shortly.")
        return self._generator

    @property
    def jobs(self) -> JobManager:
        """The background job manager; NOT_READY (503) until the model is loaded."""
        if self._jobs is None:
            raise ServiceError(Reason.NOT_READY, "The model is still loading; retry shortly.")
        return self._jobs

    @property
    def generator_if_ready(self) -> ResponseGenerator | None:
        """The generator, or None before the model is loaded."""
        return self._generator

    @property
    def jobs_if_ready(self) -> JobManager | None:
        """The job manager, or None before the model is loaded."""
        return self._jobs

    async def load(self) -> None:
        """Starts the engine worker, which loads the model on its own thread."""
        from service.engine.model import load_model
        from service.engine.worker import EngineWorker
        from service.generation import ResponseGenerator
        from service.jobs import JobManager
        from service.reasoning_echo import ReasoningEcho
        from service.tool_policy import HostedToolPolicy

        s = self.settings
        # The hub may download (with --allow-download): off the event loop.
        source = await asyncio.to_thread(resolve_model, s.model_path, s.allow_download)
        draft = None
        if s.draft_model is not None:
            draft = await asyncio.to_thread(resolve_model, s.draft_model, s.allow_download)
        worker = EngineWorker(
            lambda: load_model(source.folder, s.model_alias or source.name),
            max_batch_size=s.max_batch_size,
            max_queued_requests=s.max_queued_requests,
            prompt_cache_max_entries=s.prompt_cache_max_entries,
            prompt_cache_max_bytes=s.prompt_cache_max_bytes,
            speculative=s.speculative,
            num_draft_tokens=s.num_draft_tokens,
            load_draft=functools.partial(load_model, draft.folder) if draft else None,
            kv_bits=s.kv_bits,
            max_prefill_tokens_per_step=s.max_prefill_tokens_per_step,
            metrics=self.metrics.engine,
        )
        loaded = await worker.start()
        log.info("MLX CPU BLAS in use: %s", blas_in_use())
        self._generator = ResponseGenerator(
            loaded=loaded,
            worker=worker,
            responses=self.responses,
            conversations=self.conversations,
            default_max_output_tokens=s.default_max_output_tokens,
            # Seed: the echo runs while the prompt cache is on.
            reasoning_echo=ReasoningEcho(
                s.reasoning_echo_max_bytes if s.prompt_cache_max_entries > 0 else 0
            ),
            tool_policy=HostedToolPolicy(s.hosted_tools),
        )
        self._jobs = JobManager(
            self._generator,
            board=self.board,
            max_jobs=s.responses_background_max_jobs,
            store_max_bytes=s.responses_store_max_bytes,
        )
        await self._jobs.start()
        self._ready.set()

    async def close(self) -> None:
        """Cancels background jobs, stops the engine worker, lets the stores go."""
        if self._jobs is not None:
            await self._jobs.close()
        if self._generator is not None:
            self._generator.worker.stop()
        if self.close_stores is not None:
            await self.close_stores()
