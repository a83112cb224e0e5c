"""The engine thread's loop under supervision (`supervision.py` says what it does): the worker's
passes (`EngineWorker._pass`) run until a Stop; a pass that fails fails what it held and the
loop goes on with a new scheduler and prompt-cache memory, until the engine has failed too
often, when it ends and tells its owner (the model pool unloads the model)."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from mlx_responses.service.engine.admission import AdmissionQueue
from mlx_responses.service.engine.commands import Command, Submit, unserved
from mlx_responses.service.engine.delivery import Active
from mlx_responses.service.engine.kv_store import KVStore
from mlx_responses.service.engine.observer import ModelObserver
from mlx_responses.service.engine.requests import Chunk, EngineStats
from mlx_responses.service.engine.scheduler import Scheduler
from mlx_responses.service.engine.stream import GenerationStream
from mlx_responses.service.engine.supervision import (
    Restarts,
    ended,
    failure_reason,
    restarted,
    stopped,
)

log = logging.getLogger(__name__)


class _GaveUp(Exception):
    """The engine failed too often to go on (supervision.Restarts)."""


@dataclass
class Held:
    """What the loop holds across passes: sequences running (`active`, by uid; `by_stream`:
    the uid of each stream), commands read and not yet taken, requests being admitted now."""

    active: dict[int, Active[GenerationStream]] = field(default_factory=dict)
    by_stream: dict[int, int] = field(default_factory=dict)
    commands: deque[Command] = field(default_factory=deque)
    in_hand: list[Submit] = field(default_factory=list)
    joined: bool = False  # whether this step's admissions already took a second pass
    stepping: bool = False  # in a decode step

    def submits(self) -> list[Submit]:
        return [c for c in self.commands if isinstance(c, Submit)]


class _Engine(Protocol):
    """What of the worker the supervised loop uses."""

    name: str
    alive: bool
    failure: str | None
    restarts: Restarts
    on_failure: Callable[[str], None] | None
    link: Any
    kv: KVStore
    _release: bool
    _metrics: ModelObserver | None

    @property
    def stats(self) -> EngineStats: ...
    @property
    def _commands(self) -> queue.SimpleQueue[Any]: ...
    @property
    def _waiting(self) -> AdmissionQueue[Submit]: ...
    @property
    def _stopped(self) -> threading.Event: ...

    def _pass(self, scheduler: Scheduler, held: Held) -> bool: ...
    def _new_scheduler(self) -> Scheduler: ...
    def _emit(self, stream: GenerationStream, chunk: Chunk) -> None: ...
    def _emit_all(self, items: list[tuple[GenerationStream, Chunk]]) -> None: ...
    def _finished(self, entry: Active[GenerationStream], reason: str, now: float = 0.0) -> None: ...
    def _count(self, active: dict[int, Active[GenerationStream]]) -> None: ...
    def _park(self) -> NoReturn: ...


class Supervised:
    """EngineWorker's loop: `_serve` on the MLX thread, once the model is loaded."""

    failure: str | None  # ModelThread's: why the engine gave up

    def _serve(self: _Engine, scheduler: Scheduler) -> None:
        """The thread's loop: passes until a Stop, each failure survived (`_restart`) until
        the engine gives up."""
        held = Held()
        try:
            while True:
                try:
                    if not self._pass(scheduler, held):
                        return
                except Exception as exc:
                    if self.link is not None and not held.stepping:
                        # A group's ranks must run alike: none restarts alone but from a
                        # failed step (every rank fails it: they run the same batch).
                        raise
                    scheduler = Supervised._restart(self, scheduler, held, exc)
        except BaseException as exc:
            # The loop cannot go on (it gave up, or could not rebuild): what it held and what
            # waited fail, and its owner unloads the model (service/models/pool.py).
            if self.failure is None:
                self.failure = ended(exc)
            if isinstance(exc, _GaveUp):  # its failure is logged (`_restart`)
                log.error("engine %s stopped: %s", self.name, self.failure)
            else:
                log.exception("engine %s stopped: %s", self.name, self.failure)
        finally:
            self.alive = False
            with contextlib.suppress(Exception):
                scheduler.close()
            # What it held and what waited fail now, rather than wait for a loop that is gone.
            error = "generation worker stopped" if self.failure is None else stopped(self.failure)
            streams = [e.stream for e in held.active.values()]
            streams += unserved(self._commands, self._waiting.drain(), held.commands)
            for stream in streams:
                self._emit(stream, Chunk("", 0, "error", error=error))
            # Its owner unloads the model, whose unload joins the thread: it ends. NOTE: not
            # in a group, whose ranks park as before (the group's loss is its own report).
            if self.failure is not None and self.link is None:
                self._release = True
                if self.on_failure is not None:
                    self.on_failure(self.failure)
            if not self._release:
                self._park()
            self._stopped.set()

    def _restart(self: _Engine, scheduler: Scheduler, held: Held, exc: Exception) -> Scheduler:
        """A pass failed: the requests it held (running, or being admitted) fail with an error
        that says so, and a new scheduler and prompt-cache memory replace the old; requests
        still waiting are served next. Raises _GaveUp when the engine has failed too often."""
        gave_up = self.restarts.failed()
        log.exception(
            "engine %s failed (%d time(s) within %gs); failing %d requests and %s",
            self.name,
            self.restarts.recent,
            self.restarts.window,
            len(held.active) + len(held.in_hand),
            "stopping it" if gave_up else "restarting it",
        )
        reason = failure_reason(exc, self.restarts.recent, self.restarts.window)
        if gave_up:
            self.failure = reason  # before they hear of it: later submits are refused so
        else:
            self.stats.engine_restarts += 1
        if self._metrics is not None:
            self._metrics.engine_failed("stopped" if gave_up else "restarted")
        error = stopped(reason) if gave_up else restarted(exc)
        for entry in held.active.values():
            self._finished(entry, "error")
        streams = {id(e.stream): e.stream for e in held.active.values()}
        streams.update((id(c.stream), c.stream) for c in held.in_hand)
        self._emit_all([(s, Chunk("", 0, "error", error=error)) for s in streams.values()])
        held.active.clear()
        held.by_stream.clear()
        held.in_hand = []
        held.joined = held.stepping = False
        self._count(held.active)
        with contextlib.suppress(Exception):
            scheduler.close()
        self.kv.sync((), 0)  # their reservations go
        self.kv.rebuild()
        if gave_up:
            raise _GaveUp(reason) from exc
        return self._new_scheduler()
