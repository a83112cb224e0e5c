"""The models a core serves: every `--model`, loaded on first use, least recently used unloaded.

A request's `model` picks its model (404 `model_not_found` for a name none answers to). A model
loads on its first request (concurrent first requests share one load); with
`--max-loaded-models N`, loading one more unloads the least recently used idle model first. A
model is busy while a request or background job holds a lease on it; a busy model is never
unloaded: when every loaded model is busy, the load waits, and the least recently used one
takes no new leases until it has gone idle and been unloaded (so it cannot starve the load).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mlx_responses.service.config import ConfigError
from mlx_responses.service.errors import Reason, ServiceError, invalid
from mlx_responses.service.models.source import ModelSource, resolve_model
from mlx_responses.service.models.vision_config import vision_folder

if TYPE_CHECKING:  # a runtime imports MLX: `mlx-responses` imports this before it picks a BLAS
    from pathlib import Path

    from mlx_responses.service.config import Settings
    from mlx_responses.service.engine.distributed.lockstep import Follower, Leader
    from mlx_responses.service.engine.model import LoadedModel
    from mlx_responses.service.engine.worker import EngineWorker
    from mlx_responses.service.metrics import CoreMetrics, EngineMetrics
    from mlx_responses.service.models.runtime import ModelRuntime

log = logging.getLogger(__name__)


def check_model(model: str, accepts: Callable[[str], bool]) -> None:
    """A missing `model` is a 400; one the server does not serve is a 404 `model_not_found`."""
    if not model:
        raise invalid("Missing required parameter: 'model'.", "model")
    if not accepts(model):
        raise ServiceError(
            Reason.MODEL_NOT_FOUND,
            f"The model '{model}' does not exist or is not served by this server.",
            param="model",
        )


@dataclass
class ServedModel:
    """One configured model: its name and folder, and its runtime while it is loaded."""

    id: str
    source: ModelSource
    context_length: int
    created: int
    runtime: ModelRuntime | None = None
    loading: asyncio.Task[None] | None = None
    users: int = 0  # leases held: requests and background jobs
    draining: bool = False  # chosen for unloading: no new leases until it is unloaded
    last_used: int = 0

    def idle(self) -> bool:
        return self.users == 0

    @property
    def names(self) -> tuple[str, ...]:
        """What a request's `model` may say: the id, the folder name or the folder path."""
        return (self.id, self.source.folder.name, str(self.source.folder))


@dataclass
class Lease:
    """A model held busy (never unloaded) until released."""

    model: ServedModel
    runtime: ModelRuntime
    pool: ModelPool
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.pool.release(self.model)


def served_ids(sources: Sequence[ModelSource], aliases: Sequence[str]) -> list[str]:
    """The id of each model: the i-th `--model-alias` names the i-th `--model`, the rest keep
    their own names (folder name or repo id); two models of one name are a ConfigError."""
    ids = [*aliases, *(source.name for source in sources[len(aliases) :])]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ConfigError(
            f"several --model entries are named {', '.join(twice)}; name them with --model-alias"
        )
    return ids


def describe(source: ModelSource, model_id: str) -> ServedModel:
    """A configured model as listed before it loads: its context window from config.json."""
    from mlx_responses.service.engine.model import context_length_of

    config = json.loads((source.folder / "config.json").read_text())
    return ServedModel(
        id=model_id,
        source=source,
        context_length=context_length_of(config),
        created=int(time.time()),
    )


@dataclass
class ModelPool:
    """Every configured model, their loads and unloads, and the leases that keep them loaded."""

    settings: Settings
    metrics: CoreMetrics
    models: dict[str, ServedModel] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._names: dict[str, ServedModel] = {}
        self._ticks = itertools.count(1)
        self._load_lock = asyncio.Lock()  # one load (and its unloads) at a time
        self._waiters: set[asyncio.Future[None]] = set()  # woken when a lease ends or a load
        self.draft: ModelSource | None = None  # --draft-model, for the first --model only
        # In a distributed group: rank 0's end of the lockstep (its health follows it).
        self.link: Leader | None = None

    # --- configuration -----------------------------------------------------------------------
    async def resolve(self) -> None:
        """Finds every `--model` (the hub may download, with --allow-download); loads none."""
        s = self.settings
        sources = [
            await asyncio.to_thread(resolve_model, path, s.allow_download) for path in s.models
        ]
        for source, model_id in zip(sources, served_ids(sources, s.model_aliases), strict=True):
            self.models[model_id] = self._names[model_id] = describe(source, model_id)
        for model in self.models.values():
            for name in model.names:
                self._names.setdefault(name, model)  # an id or an earlier model keeps its name
        if s.draft_model is not None:
            self.draft = await asyncio.to_thread(resolve_model, s.draft_model, s.allow_download)

    @property
    def default(self) -> ServedModel:
        """The first `--model` (loaded at startup)."""
        return next(iter(self.models.values()))

    def find(self, name: str) -> ServedModel:
        """The model a request's `model` names: 400 if empty, 404 `model_not_found` if none."""
        if not self.models:
            raise ServiceError(Reason.NOT_READY, "The model is still loading; retry shortly.")
        check_model(name, lambda n: n in self._names)
        return self._names[name]

    # --- leases ------------------------------------------------------------------------------
    async def acquire(self, name: str) -> Lease:
        """Holds the named model busy, loading it first if it is not loaded."""
        model = self.find(name)
        await self._wait_until(lambda: not model.draining)
        model.users += 1
        try:
            while model.runtime is None:
                if model.loading is None:
                    model.loading = asyncio.create_task(self._load(model), name=f"load-{model.id}")
                # A waiter that gives up (client gone) leaves the load running for the others.
                await asyncio.shield(model.loading)
        except BaseException:
            self.release(model)
            raise
        model.last_used = next(self._ticks)
        return Lease(model, model.runtime, self)

    @contextlib.asynccontextmanager
    async def use(self, name: str) -> AsyncIterator[ModelRuntime]:
        """The named model's runtime, held busy for the block."""
        lease = await self.acquire(name)
        try:
            yield lease.runtime
        finally:
            lease.release()

    def release(self, model: ServedModel) -> None:
        """Ends one lease on `model` (Lease.release calls it)."""
        model.users -= 1
        if model.users == 0:
            self._notify()

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.add(waiter)
            try:
                await waiter
            finally:
                self._waiters.discard(waiter)

    # --- loading and unloading -----------------------------------------------------------------
    @property
    def loaded(self) -> list[ServedModel]:
        return [m for m in self.models.values() if m.runtime is not None]

    async def load_default(self) -> None:
        """Loads the first model (startup: the core is ready once it can answer requests)."""
        lease = await self.acquire(self.default.id)
        lease.release()

    async def _load(self, model: ServedModel) -> None:
        try:
            async with self._load_lock:
                if model.runtime is None:
                    await self._make_room(model)
                    model.runtime = await self._start(model)
                    self.metrics.model_loaded(model.id)
        except ConfigError:
            raise  # e.g. a draft model of another tokenizer: startup exits 2
        except Exception as exc:
            log.exception("model %s failed to load", model.id)
            raise ServiceError(
                Reason.INTERNAL, f"The model '{model.id}' could not be loaded: {exc}"
            ) from exc
        finally:
            model.loading = None
            self._notify()

    async def _make_room(self, model: ServedModel) -> None:
        """Unloads least recently used idle models until one more fits the limit."""
        limit = self.settings.max_loaded_models
        while limit is not None and len(self.loaded) >= limit:
            others = sorted((m for m in self.loaded if m is not model), key=lambda m: m.last_used)
            idle = [m for m in others if m.idle()]
            if idle:
                await self._unload(idle[0])
                continue
            # All busy: the least recently used takes no new leases, and goes once idle.
            victim = others[0]
            victim.draining = True
            log.info(
                "model %s waits for %s to go idle (--max-loaded-models %d)",
                model.id,
                victim.id,
                limit,
            )
            await self._wait_until(victim.idle)
            await self._unload(victim)

    async def _start(self, model: ServedModel) -> ModelRuntime:
        """Starts the model's engine worker (it loads the weights on its own thread)."""
        from mlx_responses.service.engine.blas import blas_in_use
        from mlx_responses.service.engine.distributed.channel import Channel
        from mlx_responses.service.engine.distributed.load import join_group
        from mlx_responses.service.engine.distributed.lockstep import Leader
        from mlx_responses.service.engine.model import load_model
        from mlx_responses.service.models.distributed import ShardLoad
        from mlx_responses.service.models.runtime import ModelRuntime

        s = self.settings
        started = time.perf_counter()
        if vision_folder(model.source.folder):
            from mlx_responses.service.models.vision_start import start_vision

            return await start_vision(model.id, model.source.folder, s, self.metrics)
        # --draft-model shares the first --model's tokenizer; the others serve without it.
        draft = self.draft if model is self.default else None
        group = join_group()
        if group is None:
            worker = engine_worker(
                s,
                model.id,
                lambda: load_model(model.source.folder, model.id),
                draft=draft.folder if draft is not None else None,
                metrics=self.metrics.engine,
            )
        else:
            leader = Leader(Channel(group), s.distributed_timeout)
            worker = engine_worker(
                s, model.id, ShardLoad(s, model.id, leader, group), leader, self.metrics.engine
            )
            leader.attach(worker)
            self.link = leader
        loaded = await worker.start()
        log.info(
            "model %s loaded in %.2fs (MLX CPU BLAS in use: %s)",
            model.id,
            time.perf_counter() - started,
            blas_in_use(),
        )
        return ModelRuntime(loaded, worker)

    async def _unload(self, model: ServedModel) -> None:
        """Stops an idle model's engine and lets its memory go (weights, KV and prompt caches)."""
        runtime, model.runtime = model.runtime, None
        if runtime is None:
            return
        started = time.perf_counter()
        await runtime.worker.unload()
        del runtime
        gc.collect()  # the model's arrays sit in reference cycles (modules, closures)
        import mlx.core as mx

        mx.clear_cache()
        model.draining = False
        self.metrics.model_unloaded(model.id)
        log.info(
            "model %s unloaded in %.2fs (least recently used; --max-loaded-models %s)",
            model.id,
            time.perf_counter() - started,
            self.settings.max_loaded_models,
        )
        self._notify()

    def stop(self) -> None:
        """Process shutdown: stops every engine (the threads park; see EngineWorker.stop)."""
        for model in self.loaded:
            assert model.runtime is not None
            model.runtime.worker.stop()


def engine_worker(
    settings: Settings,
    model_id: str,
    load: Callable[[], LoadedModel],
    link: Leader | Follower | None = None,
    metrics: EngineMetrics | None = None,
    *,
    draft: Path | None = None,
) -> EngineWorker:
    """The engine thread of one model as the settings configure it (`draft`: the draft model's
    folder, for --speculative draft); in a distributed group (`link`), every rank builds its
    engine here, from the same settings, so that they step alike."""
    from mlx_responses.service.engine.model import load_model
    from mlx_responses.service.engine.worker import EngineWorker
    from mlx_responses.service.models.distributed import group_prompt_cache

    s = settings
    speculative = "off" if s.speculative == "draft" and draft is None else s.speculative
    cache_entries, disk = s.prompt_cache_max_entries, not s.no_prompt_cache_disk
    if link is not None:
        cache_entries, disk = group_prompt_cache(s)
    return EngineWorker(
        load,
        name=f"mlx-engine-{model_id}",
        max_batch_size=s.max_batch_size,
        max_queued_requests=s.max_queued_requests,
        prompt_cache_max_entries=cache_entries,
        prompt_cache_max_bytes=s.prompt_cache_max_bytes,
        prompt_cache_dir=s.prompt_cache_dir if disk else None,
        prompt_cache_disk_bytes=s.prompt_cache_disk_bytes,
        speculative=speculative,
        num_draft_tokens=s.num_draft_tokens,
        load_draft=functools.partial(load_model, draft) if draft is not None else None,
        kv_bits=s.kv_bits,
        max_prefill_tokens_per_step=s.max_prefill_tokens_per_step,
        prefill_batch_size=s.prefill_batch_size,
        stream_window=s.stream_window_ms / 1000,
        batch_wait=s.batch_wait_ms / 1000,
        engine=s.engine,
        metrics=metrics,
        link=link,
    )
