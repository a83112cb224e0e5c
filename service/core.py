"""The composition root of the core: the models, the response pipeline, the stores, the jobs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlx_responses.service.config import Settings
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.metrics import JOB_STATES, CoreMetrics, ModelState, Snapshot, mlx_memory
from mlx_responses.service.models.pool import ModelPool
from mlx_responses.service.responses.history import HistoryResolver
from mlx_responses.service.responses.jobs import JobManager
from mlx_responses.service.responses.media_policy import MediaPolicy
from mlx_responses.service.responses.pipeline import ResponsePipeline
from mlx_responses.service.responses.reasoning_echo import ReasoningEcho
from mlx_responses.service.responses.remote_media import RemoteMedia
from mlx_responses.service.responses.tool_policy import HostedToolPolicy
from mlx_responses.service.stores.base import ConversationStore, EventLog, JobBoard, ResponseStore
from mlx_responses.service.stores.memory import InMemoryEventLog
from mlx_responses.service.stores.owned import owned_stores
from mlx_responses.service.stores.select import Stores, open_stores

if TYPE_CHECKING:
    from mlx_responses.service.engine.memory.budget import MemoryBudget

log = logging.getLogger(__name__)


@dataclass
class Core:
    """Everything the servicers delegate to; ready once the first model is loaded."""

    settings: Settings
    responses: ResponseStore
    conversations: ConversationStore
    board: JobBoard
    close_stores: Callable[[], Awaitable[None]] | None = None
    # Background responses' events (memory unless the stores give a shared log).
    events: EventLog = field(default_factory=lambda: InMemoryEventLog(1024, 64 << 20, 3600))
    _jobs: JobManager | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    draining: bool = False  # set on SIGTERM: new calls are refused (service/shutdown.py)

    def __post_init__(self) -> None:
        s = self.settings
        # --isolate-keys: the core reaches its stores only through the owner check.
        held = owned_stores(Stores(self.responses, self.conversations, self.board, self.events))
        self.responses, self.conversations = held.responses, held.conversations
        self.board, self.events = held.board, held.events
        self.metrics = CoreMetrics(self.metrics_snapshot)
        self.models = ModelPool(s, self.metrics)
        history = HistoryResolver(self.responses, self.conversations, self._job_status)
        self.pipeline = ResponsePipeline(
            responses=self.responses,
            conversations=self.conversations,
            history=history,
            default_max_output_tokens=s.default_max_output_tokens,
            # Seed: the echo runs while the prompt cache is on.
            reasoning_echo=ReasoningEcho(
                s.reasoning_echo_max_bytes if s.prompt_cache_max_entries > 0 else 0
            ),
            tool_policy=HostedToolPolicy(s.hosted_tools),
            allow_client_chat_template=s.allow_client_chat_template,
            remote_media=RemoteMedia(s.max_media_bytes, s.remote_media_timeout_secs)
            if s.allow_remote_media
            else None,
            media_policy=MediaPolicy(s.media),
            max_prompt_tokens=s.max_prompt_tokens,
        )

    @classmethod
    def with_stores(cls, settings: Settings, stores: Stores) -> Core:
        """A core over the given stores (it closes them when it closes)."""
        return cls(
            settings=settings,
            responses=stores.responses,
            conversations=stores.conversations,
            board=stores.board,
            close_stores=stores.close,
            events=stores.events,
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
    def jobs(self) -> JobManager:
        """The background job manager; NOT_READY (503) until the core is ready."""
        if self._jobs is None:
            raise self._not_ready()
        return self._jobs

    @property
    def jobs_if_ready(self) -> JobManager | None:
        """The job manager, or None before the core is ready."""
        return self._jobs

    async def _job_status(self, response_id: str) -> int | None:
        """A chain may not continue an unfinished background job (the history asks here)."""
        return None if self._jobs is None else await self._jobs.status_of(response_id)

    async def load(self) -> None:
        """Finds every model, loads the first (its engine thread loads it), starts the jobs."""
        s = self.settings
        # The hub may download (with --allow-download): off the event loop.
        await self.models.resolve()
        await self.models.load_startup()
        self._jobs = JobManager(
            self.models,
            self.pipeline,
            board=self.board,
            max_jobs=s.responses_background_max_jobs,
            store_max_bytes=s.responses_store_max_bytes,
            events=self.events,
        )
        await self._jobs.start()
        self._ready.set()

    async def metrics_snapshot(self) -> Snapshot:
        """The state the metrics' gauges show, read on the event loop at scrape time."""
        stores = {
            "responses": await _occupancy(self.responses),
            "conversations": await _occupancy(self.conversations),
        }
        jobs = dict.fromkeys(JOB_STATES.values(), 0)
        if self._jobs is not None:
            for job in list(self._jobs.active.values()):
                state = JOB_STATES.get(job.status)
                if state is not None:
                    jobs[state] += 1
        models = []
        for model in list(self.models.models.values()):
            runtime = model.runtime
            if runtime is None:
                models.append(ModelState(model.id, loaded=False))
                continue
            stats = runtime.worker.stats
            models.append(
                ModelState(
                    model.id,
                    loaded=True,
                    running=stats.running,
                    waiting=max(runtime.worker.in_flight - stats.running, 0),
                    batch_size=stats.batch_size,
                    prompt_cache_bytes=stats.prompt_cache_bytes,
                )
            )
        return Snapshot(
            models=models,
            jobs=jobs,
            stores={name: held for name, held in stores.items() if held is not None},
            mlx_memory=mlx_memory() if self.ready else None,
            **_budget_gauges(self.models.memory),
        )

    async def close(self) -> None:
        """Cancels background jobs, stops the engine workers, lets the stores go."""
        if self._jobs is not None:
            await self._jobs.close()
        self.models.stop()
        if self.close_stores is not None:
            await self.close_stores()


async def _occupancy(store: ResponseStore | ConversationStore) -> tuple[int, int, int] | None:
    """A store's entries, bytes and evictions; None while a shared store is down."""
    try:
        held = await store.occupancy()
    except Exception as exc:  # a shared store that is down must not break the scrape
        log.warning("store occupancy unavailable for metrics: %s", exc)
        return None
    return held.entries, held.bytes, held.evictions


def _budget_gauges(budget: MemoryBudget | None) -> dict[str, Any]:
    """The memory budget's figures for the metrics' snapshot (none before a model loaded)."""
    if budget is None:
        return {}
    return {
        "memory": budget.by_model(),
        "runtime_bytes": budget.runtime,
        "memory_limit": budget.limit,
    }
