"""A short generation when the model loads, so the first request runs as fast as the next.

A process's first request pays one-time costs the next ones do not: the first prefill and
decode steps of each scheduler (the solo path, the slots or the batch, and their buffers),
MLX's compiled functions (the sampler's) and the first pass of a grammar's mask. A server
restarted under a coding agent pays them on the agent's next turn, which the prompt cache's disk
tier otherwise serves as fast as memory would (#38). The model runtime (service/models/
runtime.py) renders a small conversation with a tool and compiles its tool grammar, then hands
the prompt here: it is generated on the MLX thread, through the scheduler requests use, before
the model serves (nothing else is running). It leaves nothing behind: no prompt-cache entry, no
metrics, the engine's counters as they were.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import queue
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.requests import EngineStats, LogitsProcessor
from mlx_responses.service.engine.scheduler import Admission, Scheduler
from mlx_responses.service.engine.seeded_sampler import Samplers

log = logging.getLogger(__name__)

MAX_TOKENS = 4  # decode steps each warm-up takes at most
MAX_STEPS = 64  # steps of the scheduler (prefill chunks and decode) before it gives up


@dataclass
class WarmUp:
    """A warm-up generation: its prompt, its logits processors (a grammar's: the constrained
    path), and the future its seconds are set on."""

    prompt: list[int]
    processors: list[LogitsProcessor]
    done: concurrent.futures.Future[float] = field(default_factory=concurrent.futures.Future)


class _Engine(Protocol):
    """What of the worker a warm-up uses."""

    @property
    def _commands(self) -> queue.SimpleQueue[Any]: ...
    @property
    def _uids(self) -> Iterator[int]: ...
    @property
    def _samplers(self) -> Samplers: ...
    @property
    def _kv_group(self) -> int | None: ...
    @property
    def stats(self) -> EngineStats: ...
    @property
    def loaded(self) -> LoadedModel: ...

    def _new_cache(self) -> list[Any]: ...


class WarmsUp:
    """EngineWorker's warm-up: `warm_up` from asyncio, `_warm_up` on the MLX thread."""

    def warm_up(
        self: _Engine, prompt: Sequence[int], processors: Sequence[LogitsProcessor] = ()
    ) -> asyncio.Future[float]:
        """Generates a few tokens of `prompt` on the engine thread, at the model's default
        sampling, leaving no trace; resolves to the seconds it took (0: skipped, requests
        being served)."""
        command = WarmUp(list(prompt), list(processors))
        self._commands.put(command)
        return asyncio.wrap_future(command.done)

    def _warm_up(self: _Engine, scheduler: Scheduler, command: WarmUp, busy: bool) -> None:
        if busy:  # never beside requests: they would see its steps
            command.done.set_result(0.0)
            return
        started = time.perf_counter()
        saved = dataclasses.replace(self.stats)
        uid = next(self._uids)
        loaded = self.loaded
        try:
            scheduler.admit(
                Admission(
                    uid,
                    [command.prompt],
                    MAX_TOKENS,
                    self._samplers(loaded.default_temperature, loaded.default_top_p, 0, None),
                    command.processors,
                    # As a request's without a cached prefix: the scheduler's own, or quantized.
                    self._new_cache() if self._kv_group is not None else None,
                )
            )
            for _ in range(MAX_STEPS):
                tokens = scheduler.step().tokens
                if any(t.uid == uid and t.finish_reason is not None for t in tokens):
                    break
            else:
                scheduler.drop([uid])
        except Exception:  # a warm-up that fails costs the first request its time, no more
            log.exception("the engine's warm-up failed")
            with contextlib.suppress(Exception):
                scheduler.drop([uid])
        finally:
            for name, value in vars(saved).items():
                setattr(self.stats, name, value)
            command.done.set_result(time.perf_counter() - started)
