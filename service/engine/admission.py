"""Requests waiting for memory: admitted first in, first out, as the KV store finds room.

With a memory budget (`--memory-limit`) a request the queue has accepted does not start at once:
the worker offers it here, and each pass of its loop takes from the head what the KV store
admits (`KVStore.admit` reserves the sequence's prompt plus its output, the prompt cache giving
memory back first). A request that does not fit stays, and those behind it wait with it (first
come, first served: a long prompt is not passed over forever by short ones); it starts when a
running sequence ends. Its wait is reported to the metrics. Without a budget everything offered
is admitted in the same pass, in order.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from mlx_responses.service.engine.kv_store import KVStore
from mlx_responses.service.engine.observer import ModelObserver
from mlx_responses.service.engine.requests import EngineStats, SamplingParams


class Waiting(Protocol):
    """What a queued request shows the queue: its prompt, its sampling and its stream."""

    prompt: list[int]
    sampling: SamplingParams

    @property
    def stream(self) -> object: ...


C = TypeVar("C", bound=Waiting)


@dataclass
class _Held(Generic[C]):
    command: C
    since: float
    waited: bool = False


class AdmissionQueue(Generic[C]):
    """The worker's requests not yet admitted, in arrival order (the MLX thread only)."""

    def __init__(self, stats: EngineStats) -> None:
        # NOTE: holds nothing of the worker's but its stats: a cycle back to the worker would
        # keep an unloaded model's weights alive until a later collection.
        self._stats = stats  # admission_waits, admission_wait_seconds
        self._held: deque[_Held[C]] = deque()

    def __len__(self) -> int:
        return len(self._held)

    def offer(self, command: C) -> None:
        self._held.append(_Held(command, time.perf_counter()))

    def admit(
        self, kv: KVStore | None, observer: ModelObserver | None, uids: Callable[[], int]
    ) -> list[tuple[C, int]]:
        """The requests from the head that fit now in `kv`, each with its uid (its memory is
        reserved under it); the waits of those that waited go to the stats and `observer`."""
        out: list[tuple[C, int]] = []
        taken: list[_Held[C]] = []
        while self._held:
            held = self._held[0]
            uid = uids()
            try:
                fits = kv is None or kv.admit(
                    uid, len(held.command.prompt), held.command.sampling.max_tokens
                )
            except BaseException:
                # Those taken wait again at the head (the engine restarts: supervision.py).
                self._held.extendleft(reversed(taken))
                raise
            if not fits:
                held.waited = True
                break
            taken.append(self._held.popleft())
            if held.waited:
                waited = time.perf_counter() - held.since
                self._stats.admission_waits += 1
                self._stats.admission_wait_seconds += waited
                if observer is not None:
                    observer.waited(waited)
            out.append((held.command, uid))
        return out

    def remove(self, stream: object) -> C | None:
        """Takes out the waiting request of `stream` (cancelled), if it waits here."""
        for held in self._held:
            if held.command.stream is stream:
                self._held.remove(held)
                return held.command
        return None

    def drain(self) -> list[C]:
        """Everything still waiting (the worker stops)."""
        commands = [held.command for held in self._held]
        self._held.clear()
        return commands
