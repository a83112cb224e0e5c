"""What every engine thread shares: the thread that loads and owns a model, and its admission.

MLX state never touches another thread, so an engine loads its model on its own thread and takes
work there through a command queue. This base holds that lifecycle (start, stop, unload), the
count of requests in flight and the admission limit; the engine (worker.py, for text and
vision models alike) holds what its thread does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, TypeVar

from mlx_responses.service.engine.fan_out_groups import FanOutGroups
from mlx_responses.service.engine.kv_store import KVStore
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.observer import ModelObserver
from mlx_responses.service.engine.requests import EngineStoppedError, QueueFullError
from mlx_responses.service.engine.supervision import stopped
from mlx_responses.service.fan_out import FAN_OUT


@dataclass
class Stop:
    """Cancels everything on the thread; `release` also ends it and lets the model go (unload)."""

    release: bool = False


R = TypeVar("R")  # what the thread's load returns


class ModelThread(ABC, Generic[R]):
    """One dedicated thread per model; subclasses run their commands in `_run`."""

    name: str  # of the thread

    def _init_thread(self) -> None:
        """Called by the subclass's __post_init__."""
        self._commands: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._in_flight = 0
        self._groups = FanOutGroups()  # fan-outs admitted as one unit (service/fan_out.py)
        self._loaded: LoadedModel | None = None
        self.alive = False
        # Why the engine gave up, once it has (supervision.py): later submits are refused so.
        self.failure: str | None = None
        self._stopped = threading.Event()  # the thread parked or ended
        # The model's KV memory (kv_store.py: made by the engine once the model is loaded; an
        # engine without one holds no budget) and its observer (the metrics).
        self.kv = KVStore(None, None)
        self._metrics: ModelObserver | None = None

    @property
    def loaded(self) -> LoadedModel:
        """The model, once start() returned."""
        if self._loaded is None:
            raise EngineStoppedError("the model is not loaded")
        return self._loaded

    @property
    def in_flight(self) -> int:
        """Requests submitted and not finished (running, prefilling or queued)."""
        return self._in_flight

    # --- called from asyncio -------------------------------------------------------------
    async def start(self) -> LoadedModel:
        """Starts the thread, which loads the model; returns it once loaded."""
        if self._thread is not None:
            return self.loaded
        ready: concurrent.futures.Future[R] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=self.name, daemon=True
        )
        self._thread.start()
        self._loaded = self._took(await asyncio.wrap_future(ready))
        self.alive = True
        return self._loaded

    def stop(self, timeout: float = 10.0) -> None:
        """Cancels everything and waits until the thread has parked (process shutdown)."""
        if self._thread is not None:
            self._commands.put(Stop())
            self._stopped.wait(timeout)
            self._thread = None

    async def unload(self) -> None:
        """Cancels everything and lets the thread end, dropping the model and what it holds.

        The memory goes once the caller drops its own references to `loaded` as well.
        """
        thread = self._thread
        if thread is None:
            return
        self._commands.put(Stop(release=True))
        await asyncio.to_thread(thread.join)
        self._thread = None
        self._loaded = None
        await asyncio.to_thread(self._finish_writes)
        self._released()

    def has_room(self) -> bool:
        """Whether a submit now would be accepted (the queue not full, or its fan-out's
        group admitted)."""
        group = FAN_OUT.get()
        with self._lock:
            held = group is not None and self._groups.holds(group[0])
            return held or self._in_flight < self._capacity

    def check_memory(self, prompt_tokens: int, max_tokens: int) -> None:
        """Raises MemoryLimitError for a request that could never fit the memory budget."""
        self.kv.check(prompt_tokens, max_tokens)

    def refused(self, reason: str) -> None:
        """Counts a request refused before it was queued (`memory`, `queue_full`)."""
        if self._metrics is not None:
            self._metrics.refused(reason)

    def _admit(self) -> None:
        """Counts a submitted request in; refuses it when stopped or full. A call of a
        fan-out (service/fan_out.py) counts as its group: the first is admitted where one
        request would be and reserves the group, the others pass on that reservation."""
        if not self.alive:
            if self.failure is not None:
                raise EngineStoppedError(stopped(self.failure))
            raise EngineStoppedError("the generation worker is not running")
        group = FAN_OUT.get()
        with self._lock:
            self._in_flight -= self._groups.expire()
            if group is not None and self._groups.take(group[0]):
                return
            if self._in_flight >= self._capacity:
                raise QueueFullError("the generation queue is full")
            self._in_flight += self._groups.reserve(*group) if group is not None else 1

    # --- the subclass's part ---------------------------------------------------------------
    @property
    @abstractmethod
    def _capacity(self) -> int:
        """Requests in flight at most: running and queued."""

    @abstractmethod
    def _took(self, result: R) -> LoadedModel:
        """The model out of what the thread's load returned (on the loop, once loaded)."""

    def _finish_writes(self) -> None:
        """Blocks until what the engine queued for writing is written (an unload, once the
        thread ended; off the event loop)."""

    def _released(self) -> None:
        """Drops what the engine holds beside the model (after an unload)."""

    def _park(self) -> NoReturn:
        """Never returns: the thread stays blocked until the process exits.

        NOTE: MLX keeps a thread-local compile cache whose destructor takes the GIL; run at
        thread exit, it can race interpreter shutdown and abort the process (std::terminate).
        A parked thread never runs it.
        """
        self._stopped.set()
        while True:
            threading.Event().wait()

    @abstractmethod
    def _run(self, ready: concurrent.futures.Future[R]) -> None:
        """The thread: loads the model (its result or failure set on `ready`), then works."""
