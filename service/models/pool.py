"""The models a core serves: every `--model` and `--model-dir` folder, loaded on first use,
unloaded when idle past their keep-alive or least recently used.

A request's `model` picks its model (404 `model_not_found` for a name none answers to; a
`--model-dir` is rescanned first, so a folder added later serves). A model loads on its first
request (concurrent first requests share one load); with `--max-loaded-models N`, loading one
more unloads the least recently used idle model first. A model is busy while a request or
background job holds a lease on it; a busy model is never unloaded: when every loaded model is
busy, the load waits, and the least recently used one takes no new leases until it has gone
idle and been unloaded (so it cannot starve the load). Once idle, a model stays loaded for the
`keep_alive` of its latest request (the server's `--keep-alive` when it gave none), then
unloads; `--pin` keeps one loaded for good. Load and unload are also explicit (`load`,
`unload`: an unload of a busy model is refused, MODEL_BUSY).

A model whose engine fails repeatedly (service/engine/supervision.py) is unloaded and marked
failed: its health entry (`health_name`) turns NOT_SERVING, `ListModels` shows why, and its
requests are refused (503) for a back-off, which doubles with each such failure in a row; the
first request after it loads the model again (an explicit load at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import math
import time
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlx_responses.service.config import ConfigError
from mlx_responses.service.errors import Reason, ServiceError, invalid
from mlx_responses.service.flags import KEEP_FOREVER, keep_alive_seconds
from mlx_responses.service.models.disk_metrics import watch_prompt_disk
from mlx_responses.service.models.embedding_config import embedding_folder
from mlx_responses.service.models.folder_check import ModelFolderError, check_folder
from mlx_responses.service.models.model_dir import check_model_dirs, scan_model_dirs
from mlx_responses.service.models.source import ModelSource, resolve_model, served_ids
from mlx_responses.service.models.vision_config import vision_folder
from mlx_responses.service.text.harmony import add_stops

from mlx_responses.v1 import responses_pb2 as pb

if TYPE_CHECKING:  # a runtime imports MLX: `mlx-responses` imports this before it picks a BLAS
    from pathlib import Path

    from mlx_responses.service.config import Settings
    from mlx_responses.service.engine.distributed.lockstep import Follower, Leader
    from mlx_responses.service.engine.memory.budget import MemoryBudget
    from mlx_responses.service.engine.model import LoadedModel
    from mlx_responses.service.engine.worker import EngineWorker
    from mlx_responses.service.metrics import CoreMetrics, EngineMetrics
    from mlx_responses.service.models.runtime import ModelRuntime

log = logging.getLogger(__name__)

# Why a model loaded or unloaded (the metrics' `reason` label).
LOAD_REASONS = ("startup", "request", "explicit")
UNLOAD_REASONS = ("keep_alive", "lru", "explicit", "failed")
# Seconds a model whose engine gave up stays unloaded: doubled for each time in a row (its
# previous failure less than RESET_AFTER seconds before), up to BACKOFF_MAX.
BACKOFF = 5.0
BACKOFF_MAX = 300.0
RESET_AFTER = 600.0


def health_name(model_id: str) -> str:
    """A model's entry in the gRPC health service: SERVING, or NOT_SERVING while failed."""
    return f"models/{model_id}"


@dataclass
class Failure:
    """Why a model's engine gave up, when (Unix seconds) and from when it may load again."""

    message: str
    at: float
    reload_after: float
    in_a_row: int = 1


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


def keep_alive_of(params: pb.CreateResponseParams) -> float | None:
    """A request's `keep_alive` in seconds; None when it gave none."""
    return params.keep_alive_seconds if params.HasField("keep_alive_seconds") else None


def request_keep_alive(value: float | None) -> float | None:
    """A request's `keep_alive_seconds` as the pool keeps it; NaN is a 400 naming keep_alive."""
    if value is None:
        return None
    try:
        return keep_alive_seconds(value)
    except ValueError as exc:
        raise invalid(f"Invalid 'keep_alive': {exc}.", "keep_alive", "invalid_value") from exc


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
    from_dir: bool = False  # found under a --model-dir (it goes if its folder does)
    pinned: bool = False  # --pin: never unloaded by keep-alive or --max-loaded-models
    keep_alive: float = KEEP_FOREVER  # seconds it stays once idle: its latest request's
    expiry: asyncio.TimerHandle | None = None  # the keep-alive timer while idle
    expires_at: float | None = None  # Unix seconds the timer fires
    memory_bytes: int = 0  # its weights' bytes while loaded
    failure: Failure | None = None  # its engine gave up; cleared once it loads again
    last_failure: Failure | None = None  # the latest, kept (its back-off doubles the next)
    embeds: bool = False  # an embedding model (models/embedding_config.py): /v1/embeddings only

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


def describe(source: ModelSource, model_id: str) -> ServedModel:
    """A configured model as listed before it loads: its context window from config.json
    (ModelFolderError where a file of its folder cannot be served: models/folder_check.py)."""
    from mlx_responses.service.engine.model import context_length_of

    config = check_folder(source.folder)
    return ServedModel(
        id=model_id,
        source=source,
        context_length=context_length_of(config),
        created=int(time.time()),
        embeds=embedding_folder(source.folder),
    )


def unservable(name: str, why: str) -> ServiceError:
    """The 400 of a request naming a model whose folder cannot be served (`why`: the
    ModelFolderError's message, naming folder, file and field)."""
    return invalid(f"The model '{name}' cannot be served: {why}", "model", "invalid_model")


def weights_bytes(runtime: ModelRuntime) -> int:
    """The bytes of a loaded model's weights (quantization scales included)."""
    from mlx.utils import tree_flatten

    leaves: Any = tree_flatten(runtime.loaded.model.parameters())
    return sum(int(array.nbytes) for _, array in leaves)


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
        self._expiring: set[asyncio.Task[None]] = set()  # keep-alive unloads under way
        self._resolved = False
        # --model-dir folders found while serving whose files cannot be served, by name: the
        # reason (a request naming one is a 400 saying it; the others are served as ever).
        self._broken: dict[str, str] = {}
        self.draft: ModelSource | None = None  # --draft-model, for the first --model only
        # The process's memory budget (--memory-limit), shared by every model's engine; made
        # when the first model starts (it imports MLX).
        self.memory: MemoryBudget | None = None
        # In a distributed group: rank 0's end of the lockstep (its health follows it).
        self.link: Leader | None = None
        # Told (model id, serving) when a model's engine gave up and when it loaded again
        # (the core's gRPC health service: service/server.py).
        self.on_health: Callable[[str, bool], None] | None = None
        self._unloading: set[asyncio.Task[None]] = set()  # unloads of failed models
        # Seconds of the first back-off (tests: shorter).
        self.backoff = BACKOFF

    # --- configuration -----------------------------------------------------------------------
    async def resolve(self) -> None:
        """Finds every `--model` (the hub may download, with --allow-download) and every
        `--model-dir` folder, and marks the `--pin` ones; loads none."""
        s = self.settings
        sources = [
            await asyncio.to_thread(resolve_model, path, s.allow_download) for path in s.models
        ]
        for source, model_id in zip(sources, served_ids(sources, s.model_aliases), strict=True):
            try:
                self._add(describe(source, model_id))
            except ModelFolderError as exc:
                raise ConfigError(f"--model {source.folder}: {exc}") from None
        check_model_dirs(s.model_dirs)
        self._scan(startup=True)
        for name in s.pins:
            pinned = self._names.get(name)
            if pinned is None:
                raise ConfigError(f"--pin {name}: no --model or --model-dir model is named so")
            pinned.pinned = True
        limit = s.max_loaded_models
        held = sum(m.pinned for m in self.models.values())
        if limit is not None and held >= limit and held < len(self.models):
            raise ConfigError(
                f"--pin keeps {held} models loaded: --max-loaded-models {limit} leaves no room "
                "for the others"
            )
        if s.draft_model is not None:
            self.draft = await asyncio.to_thread(resolve_model, s.draft_model, s.allow_download)
        self._resolved = True

    def _add(self, model: ServedModel) -> None:
        self.models[model.id] = self._names[model.id] = model
        for name in model.names:
            self._names.setdefault(name, model)  # an id or an earlier model keeps its name

    def _scan(self, *, startup: bool = False) -> None:
        """Adds the `--model-dir` folders not served yet; forgets unloaded ones whose folder
        went. At startup a folder named as another model is a ConfigError, later a warning."""
        found = scan_model_dirs(self.settings.model_dirs)
        folders = {m.source.folder for m in self.models.values()}
        for source in found:
            if source.folder in folders:
                continue
            clash = self.models.get(source.name)
            if clash is not None:
                message = (
                    f"--model-dir folder {source.folder} is named {source.name!r}, as the "
                    f"model at {clash.source.folder}"
                )
                if startup:
                    raise ConfigError(message)
                log.warning("%s: not served", message)
                continue
            try:
                model = describe(source, source.name)
            except ModelFolderError as exc:  # a folder still being copied in, or a bad one
                if startup:
                    raise ConfigError(f"--model-dir: {exc}") from None
                if self._broken.get(source.name) != str(exc):
                    log.warning("--model-dir: %s; not served", exc)
                self._broken[source.name] = str(exc)
                continue
            except OSError as exc:
                log.warning("--model-dir folder %s: unreadable (%s)", source.folder, exc)
                continue
            self._broken.pop(source.name, None)
            model.from_dir = True
            self._add(model)
            log.info("model %s found in --model-dir (%s)", model.id, source.folder)
        present = {source.folder for source in found}
        names = {source.name for source in found}
        self._broken = {n: why for n, why in self._broken.items() if n in names}
        for model in [m for m in self.models.values() if m.from_dir]:
            gone = model.source.folder not in present
            if gone and model.runtime is None and model.loading is None and model.idle():
                del self.models[model.id]
                self._names = {n: m for n, m in self._names.items() if m is not model}

    def rescan(self) -> None:
        """Looks for `--model-dir` folders added or removed since (a listing, an unknown name)."""
        if self.settings.model_dirs and self._resolved:
            self._scan()

    @property
    def default(self) -> ServedModel:
        """The first `--model` (loaded at startup)."""
        return next(iter(self.models.values()))

    def find(self, name: str) -> ServedModel:
        """The model a request's `model` names: 400 if empty, 404 `model_not_found` if none."""
        if not self._resolved:
            raise ServiceError(Reason.NOT_READY, "The model is still loading; retry shortly.")
        if name and name not in self._names:
            self.rescan()
            if name in self._broken and name not in self._names:
                raise unservable(name, self._broken[name])
        check_model(name, lambda n: n in self._names)
        return self._names[name]

    # --- leases ------------------------------------------------------------------------------
    async def acquire(
        self,
        name: str,
        keep_alive: float | None = None,
        *,
        reason: str = "request",
        embeds: bool = False,
    ) -> Lease:
        """Holds the named model busy, loading it first if it is not loaded. `keep_alive`:
        seconds it stays once idle (negative: for good; None: the server's --keep-alive).
        A request (`reason`) for what the model does not do is a 400 before it loads:
        `embeds`, an embeddings request, for a generation model, or the other way round."""
        stay = request_keep_alive(keep_alive)
        model = self.find(name)
        if reason != "explicit":
            _refuse_failed(model)
        if reason == "request" and model.embeds != embeds:
            raise _wrong_kind(model)
        await self._wait_until(lambda: not model.draining)
        model.users += 1
        self._cancel_expiry(model)
        model.keep_alive = self.settings.keep_alive if stay is None else stay
        try:
            while model.runtime is None:
                if model.loading is None:
                    model.loading = asyncio.create_task(
                        self._load(model, reason), name=f"load-{model.id}"
                    )
                # A waiter that gives up (client gone) leaves the load running for the others.
                await asyncio.shield(model.loading)
        except BaseException:
            self.release(model)
            raise
        model.last_used = next(self._ticks)
        return Lease(model, model.runtime, self)

    @contextlib.asynccontextmanager
    async def use(self, params: pb.CreateResponseParams) -> AsyncIterator[ModelRuntime]:
        """The runtime of the model a request names, held busy for the block (its
        `keep_alive` restarts the model's)."""
        lease = await self.acquire(params.model, keep_alive_of(params))
        try:
            yield lease.runtime
        finally:
            lease.release()

    def release(self, model: ServedModel) -> None:
        """Ends one lease on `model` (Lease.release calls it); idle, its keep-alive starts."""
        model.users -= 1
        if model.users == 0:
            self._start_expiry(model)
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

    # --- keep-alive ----------------------------------------------------------------------------
    def _start_expiry(self, model: ServedModel) -> None:
        """An idle, loaded model unloads `keep_alive` seconds from now (unless pinned or kept)."""
        self._cancel_expiry(model)
        if model.runtime is None or model.pinned or model.keep_alive < 0:
            return
        loop = asyncio.get_running_loop()
        model.expiry = loop.call_later(model.keep_alive, self._expire, model)
        model.expires_at = time.time() + model.keep_alive

    def _cancel_expiry(self, model: ServedModel) -> None:
        if model.expiry is not None:
            model.expiry.cancel()
        model.expiry = model.expires_at = None

    def _expire(self, model: ServedModel) -> None:
        timer = model.expiry
        task = asyncio.create_task(self._unload_expired(model, timer), name=f"expire-{model.id}")
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)

    async def _unload_expired(self, model: ServedModel, timer: asyncio.TimerHandle | None) -> None:
        async with self._load_lock:
            # A request since (a new timer, or one running) keeps it.
            if model.expiry is timer and model.idle() and not model.pinned:
                await self._unload(model, "keep_alive")

    # --- loading and unloading -----------------------------------------------------------------
    @property
    def loaded(self) -> list[ServedModel]:
        return [m for m in self.models.values() if m.runtime is not None]

    async def load_startup(self) -> None:
        """Loads the first `--model` and every `--pin` model (startup: the core is ready once
        they answer requests); `--model-dir` folders load on their first request."""
        pinned = [m for m in self.models.values() if m.pinned]
        first = [self.default] if self.settings.models and not self.default.pinned else []
        for model in [*pinned, *first]:
            limit = self.settings.max_loaded_models
            if model.pinned or limit is None or len(self.loaded) < limit:
                lease = await self.acquire(model.id, reason="startup")
                lease.release()

    async def load(self, name: str, keep_alive: float | None = None) -> ServedModel:
        """Loads the named model now (explicit; a no-op if loaded) and restarts its keep-alive."""
        lease = await self.acquire(name, keep_alive, reason="explicit")
        lease.release()
        return lease.model

    async def unload(self, name: str) -> ServedModel:
        """Unloads the named model now (explicit; a no-op if not loaded); MODEL_BUSY while a
        request or background job uses it. A pinned model unloads too (it loads again on its
        next request, and stays pinned)."""
        model = self.find(name)
        _refuse_busy(model)
        async with self._load_lock:
            _refuse_busy(model)
            await self._unload(model, "explicit")
        return model

    async def _load(self, model: ServedModel, reason: str) -> None:
        try:
            async with self._load_lock:
                if model.runtime is None:
                    await self._make_room(model)
                    started = time.perf_counter()
                    runtime = await self._start(model)
                    model.memory_bytes = weights_bytes(runtime)
                    model.runtime = runtime
                    self._watch(model, runtime)
                    self.metrics.model_loaded(model.id, reason, time.perf_counter() - started)
        except ConfigError:
            raise  # e.g. a draft model of another tokenizer: startup exits 2
        except ModelFolderError as exc:  # its files changed since it was listed
            log.warning("model %s: %s", model.id, exc)
            raise unservable(model.id, str(exc)) from None
        except Exception as exc:
            from mlx_responses.service.engine.memory.budget import MemoryLimitError

            if isinstance(exc, MemoryLimitError):  # --memory-limit below what it needs
                if reason == "startup":
                    raise ConfigError(str(exc)) from None
                raise invalid(str(exc), "model", "memory_limit_exceeded") from None
            log.exception("model %s failed to load", model.id)
            raise ServiceError(
                Reason.INTERNAL, f"The model '{model.id}' could not be loaded: {exc}"
            ) from exc
        finally:
            model.loading = None
            self._notify()

    # --- engine failures -----------------------------------------------------------------------
    def _watch(self, model: ServedModel, runtime: ModelRuntime) -> None:
        """The model's engine tells the pool (on this loop) when it gives up; a model that
        failed before serves again."""
        loop = asyncio.get_running_loop()
        worker = runtime.worker
        # Weakly: the worker (whose thread may stay parked) must not keep an unloaded
        # runtime, and its weights, alive through this callback.
        held = weakref.ref(runtime)

        def failed(reason: str) -> None:  # on the engine thread
            if (alive := held()) is None:
                return
            with contextlib.suppress(RuntimeError):  # the loop closed (process exit)
                loop.call_soon_threadsafe(self._engine_failed, model, alive, reason)

        worker.on_failure = failed
        if model.failure is not None:
            model.failure = None
            self._health(model, serving=True)

    def _engine_failed(self, model: ServedModel, runtime: ModelRuntime, reason: str) -> None:
        """The engine of `runtime` gave up: the model is marked failed and unloaded."""
        if model.runtime is not runtime:
            return
        now = time.time()
        before = model.last_failure
        in_a_row = before.in_a_row + 1 if before and now - before.at < RESET_AFTER else 1
        backoff = min(BACKOFF_MAX, self.backoff * 2 ** (in_a_row - 1))
        model.failure = model.last_failure = Failure(reason, now, now + backoff, in_a_row)
        log.error(
            "model %s: its engine failed repeatedly (%s); unloaded, it loads again on a "
            "request in %gs",
            model.id,
            reason,
            backoff,
        )
        self._health(model, serving=False)
        task = asyncio.create_task(self._unload_failed(model, runtime), name=f"fail-{model.id}")
        self._unloading.add(task)
        task.add_done_callback(self._unloading.discard)

    async def _unload_failed(self, model: ServedModel, runtime: ModelRuntime) -> None:
        async with self._load_lock:
            if model.runtime is runtime:  # not unloaded meanwhile
                await self._unload(model, "failed")

    def _health(self, model: ServedModel, *, serving: bool) -> None:
        if self.on_health is not None:
            self.on_health(model.id, serving)

    async def _make_room(self, model: ServedModel) -> None:
        """Unloads least recently used idle models until one more fits the limit (pinned
        models stay)."""
        limit = self.settings.max_loaded_models
        while limit is not None and len(self.loaded) >= limit:
            others = sorted(
                (m for m in self.loaded if m is not model and not m.pinned),
                key=lambda m: m.last_used,
            )
            if not others:  # every loaded model is pinned (only the pinned load at startup)
                return
            idle = [m for m in others if m.idle()]
            if idle:
                await self._unload(idle[0], "lru")
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
            await self._unload(victim, "lru")

    async def _start(self, model: ServedModel) -> ModelRuntime:
        """Starts the model's engine worker (it loads the weights on its own thread)."""
        from mlx_responses.service.engine.blas import blas_in_use
        from mlx_responses.service.engine.distributed.channel import Channel
        from mlx_responses.service.engine.distributed.load import join_group
        from mlx_responses.service.engine.distributed.lockstep import Leader
        from mlx_responses.service.engine.memory.device import process_budget
        from mlx_responses.service.engine.model import load_model
        from mlx_responses.service.models.distributed import ShardLoad
        from mlx_responses.service.models.runtime import ModelRuntime

        s = self.settings
        started = time.perf_counter()
        await asyncio.to_thread(check_folder, model.source.folder)
        if self.memory is None:
            self.memory = process_budget(s.memory_limit)
        if model.embeds:
            from mlx_responses.service.models.embedding_start import start_embedding

            return await start_embedding(model.id, model.source.folder, s, self.memory)
        vision = vision_folder(model.source.folder)
        load: Callable[[], LoadedModel] = lambda: load_model(model.source.folder, model.id)  # noqa: E731
        if vision:
            from mlx_responses.service.models.vision_start import vision_loader

            load = vision_loader(model.id, model.source.folder)
        # --draft-model shares the first --model's tokenizer; the others serve without it.
        draft = self.draft if s.models and model is self.default else None
        group = join_group()
        if group is None:
            worker = engine_worker(
                s,
                model.id,
                load,
                draft=draft.folder if draft is not None else None,
                metrics=self.metrics.engine,
                memory=self.memory,
            )
        else:
            # NOTE: no memory budget in a group: each rank measures its own process, and
            # admission must not differ between ranks (docs/guides/distributed.md).
            leader = Leader(Channel(group), s.distributed_timeout)
            worker = engine_worker(
                s, model.id, ShardLoad(s, model.id, leader, group), leader, self.metrics.engine
            )
            leader.attach(worker)
            self.link = leader
        loaded = await worker.start()
        watch_prompt_disk(self.metrics, model.id, worker.stats.disk)
        runtime: ModelRuntime
        if vision:
            from mlx_responses.service.models.vision_start import vision_runtime

            runtime = vision_runtime(model.id, loaded, worker, s, self.metrics)
        else:
            runtime = ModelRuntime(loaded, worker)
        # Before it serves: its first request runs as fast as the next (engine/warm_up.py).
        warm_up = await runtime.warm_up()
        log.info(
            "model %s loaded in %.2fs, %.2fs of it warming up (MLX CPU BLAS in use: %s)",
            model.id,
            time.perf_counter() - started,
            warm_up,
            blas_in_use(),
        )
        return runtime

    async def _unload(self, model: ServedModel, reason: str) -> None:
        """Stops an idle model's engine and lets its memory go (weights, KV and prompt caches),
        the prompt cache's disk tier written out first."""
        self._cancel_expiry(model)
        runtime, model.runtime = model.runtime, None
        if runtime is None:
            return
        started = time.perf_counter()
        await runtime.worker.unload()  # the disk tier's queued writes are written by then
        del runtime
        from mlx_responses.service.engine.memory.device import give_back_memory

        await asyncio.to_thread(give_back_memory)
        model.draining = False
        model.memory_bytes = 0
        self.metrics.model_unloaded(model.id, reason)
        log.info(
            "model %s unloaded in %.2fs (%s)",
            model.id,
            time.perf_counter() - started,
            _WHY[reason].format(self.settings.max_loaded_models),
        )
        self._notify()

    def stop(self) -> None:
        """Process shutdown: stops every engine (the threads park; see EngineWorker.stop)."""
        for model in self.models.values():
            self._cancel_expiry(model)
        for task in [*self._expiring, *self._unloading]:
            task.cancel()
        for model in self.loaded:
            assert model.runtime is not None
            model.runtime.worker.stop()


def _wrong_kind(model: ServedModel) -> ServiceError:
    if model.embeds:
        what = "an embedding model: it serves /v1/embeddings, and generates nothing"
    else:
        what = "a generation model: it does not serve /v1/embeddings"
    return invalid(f"The model '{model.id}' is {what}.", "model", "model_not_supported")


_WHY = {
    "keep_alive": "idle past its keep_alive",
    "failed": "its engine failed repeatedly",
    "lru": "least recently used; --max-loaded-models {}",
    "explicit": "asked to",
}


def _refuse_busy(model: ServedModel) -> None:
    """MODEL_BUSY (409) for an explicit unload of a model in use or loading."""
    if not model.idle() or model.loading is not None:
        raise ServiceError(
            Reason.MODEL_BUSY,
            f"The model '{model.id}' is in use ({model.users} request(s) or background "
            "job(s)); retry once they finish.",
            param="model",
        )


def _refuse_failed(model: ServedModel) -> None:
    """NOT_READY (503) for a request to a model whose engine gave up, until its back-off ends."""
    failure = model.failure
    if failure is None or time.time() >= failure.reload_after:
        return
    wait = max(1, math.ceil(failure.reload_after - time.time()))
    raise ServiceError(
        Reason.NOT_READY,
        f"The model '{model.id}' was unloaded after its engine failed repeatedly "
        f"({failure.message}); it loads again on a request in {wait}s.",
    )


def _with_format_stops(load: Callable[[], LoadedModel]) -> Callable[[], LoadedModel]:
    """`load`, then the stop tokens the model's output format needs (harmony's `<|call|>`)."""

    def loaded() -> LoadedModel:
        model = load()
        add_stops(model.tokenizer)
        return model

    return loaded


def engine_worker(
    settings: Settings,
    model_id: str,
    load: Callable[[], LoadedModel],
    link: Leader | Follower | None = None,
    metrics: EngineMetrics | None = None,
    *,
    draft: Path | None = None,
    memory: MemoryBudget | None = None,
) -> EngineWorker:
    """The engine thread of one model as the settings configure it (`draft`: the draft model's
    folder, for --speculative draft; `memory`: the process's budget); in a distributed group
    (`link`), every rank builds its engine here, from the same settings, so that they step
    alike."""
    from mlx_responses.service.engine.model import load_model
    from mlx_responses.service.engine.vision.encoder import ImageEncoder
    from mlx_responses.service.engine.worker import EngineWorker
    from mlx_responses.service.models.distributed import group_prompt_cache

    s = settings
    off = s.speculative == "none" or (s.speculative == "draft" and draft is None)
    speculative = "off" if off else s.speculative
    cache_entries, disk = s.prompt_cache_max_entries, not s.no_prompt_cache_disk
    if link is not None:
        cache_entries, disk = group_prompt_cache(s)
    return EngineWorker(
        _with_format_stops(load),
        name=f"mlx-engine-{model_id}",
        max_batch_size=s.max_batch_size,
        max_queued_requests=s.max_queued_requests,
        prompt_cache_max_entries=cache_entries,
        prompt_cache_max_bytes=s.prompt_cache_max_bytes,
        checkpoint_interval=s.prompt_checkpoint_tokens,
        prompt_cache_dir=s.prompt_cache_dir if disk else None,
        prompt_cache_disk_bytes=s.prompt_cache_disk_bytes,
        speculative=speculative,
        num_draft_tokens=s.num_draft_tokens,
        mtp=not s.no_mtp and link is None,  # a group's ranks shard the model, not its head
        load_draft=functools.partial(load_model, draft) if draft is not None else None,
        draft_folder=draft,
        kv_bits=s.kv_bits,
        max_prefill_tokens_per_step=s.max_prefill_tokens_per_step,
        prefill_batch_size=s.prefill_batch_size,
        stream_window=s.stream_window_ms / 1000,
        batch_wait=s.batch_wait_ms / 1000,
        engine=s.engine,
        metrics=metrics,
        link=link,
        encoder=ImageEncoder(s.image_encoding_cache_entries, s.image_encoding_cache_bytes),
        memory=memory,
    )
