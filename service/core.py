"""The composition root of the core: the models, their engines, the stores and the jobs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mlx_responses.service.config import Settings
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.metrics import CoreMetrics
from mlx_responses.service.models.pool import ModelPool
from mlx_responses.service.stores.base import ConversationStore, JobBoard, ResponseStore
from mlx_responses.service.stores.select import Stores, open_stores

if TYPE_CHECKING:  # the generator imports MLX; the façade must be able to skip it
    from mlx_responses.service.responses.jobs import JobManager
    from mlx_responses.service.responses.pipeline import ResponseGenerator

log = logging.getLogger(__name__)


@dataclass
class Core:
    """Everything the servicers delegate to; ready once the first model is loaded."""

    settings: Settings
    responses: ResponseStore
    conversations: ConversationStore
    board: JobBoard
    close_stores: Callable[[], Awaitable[None]] | None = None
    _jobs: JobManager | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    metrics: CoreMetrics = field(default_factory=CoreMetrics)
    draining: bool = False  # set on SIGTERM: new calls are refused (service/shutdown.py)

    def __post_init__(self) -> None:
        self.models = ModelPool(self.settings, self.responses, self.conversations, self.metrics)

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

    def _not_ready(self) -> ServiceError:
        return ServiceError(Reason.NOT_READY, "The model is still loading; retry shortly.")

    def require_ready(self) -> None:
        """NOT_READY (503) until the first model is loaded."""
        if not self.ready:
            raise self._not_ready()

    @property
    def generator(self) -> ResponseGenerator:
        """The first model's generator; NOT_READY (503) while it is not loaded."""
        if not self.models.models or self.models.default.generator is None:
            raise self._not_ready()
        return self.models.default.generator

    @property
    def jobs(self) -> JobManager:
        """The background job manager; NOT_READY (503) until the core is ready."""
        if self._jobs is None:
            raise self._not_ready()
        return self._jobs

    @property
    def jobs_if_ready(self) -> JobManager | None:
        """The job manager, or None before the core is ready."""
        return self._jobs

    async def load(self) -> None:
        """Finds every model, loads the first (its engine thread loads it), starts the jobs."""
        from mlx_responses.service.responses.jobs import JobManager

        s = self.settings
        # The hub may download (with --allow-download): off the event loop.
        await self.models.resolve()
        await self.models.load_default()
        self._jobs = JobManager(
            self.models,
            board=self.board,
            max_jobs=s.responses_background_max_jobs,
            store_max_bytes=s.responses_store_max_bytes,
        )
        await self._jobs.start()
        self._ready.set()

    async def close(self) -> None:
        """Cancels background jobs, stops the engine workers, lets the stores go."""
        if self._jobs is not None:
            await self._jobs.close()
        self.models.stop()
        if self.close_stores is not None:
            await self.close_stores()
