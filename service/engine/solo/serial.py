"""One sequence at a time, each decoded as mlx-lm's `generate_step` does: the scheduler for
architectures mlx-lm's batch decodes wrong or cannot hold (`engine/architectures.py`).

Sequences run in arrival order through `SoloSequence` (its own cache, the next forward queued
before the host reads a token, logits processors as `generate_step` applies them); the others
wait. Greedy output is therefore mlx-lm's own for each prompt, whatever else is queued. A
sequence starts from a prompt-cache entry when the worker hands one in, and leaves entries at
its checkpoints and where its prompt is in but for its last token (`prompt_ends`), as the solo
path does.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.scheduler import (
    Admission,
    Alone,
    PromptEnd,
    SpeculationCounts,
    StepResult,
)
from mlx_responses.service.engine.solo.sequence import SoloSequence


class TextSerialScheduler:
    """A `scheduler.Scheduler` that decodes its sequences one after another."""

    rewinds_any_window = False
    speculates = False
    takes_embeddings = False

    def __init__(
        self,
        model: Any,
        *,
        stop_tokens: Collection[int],
        prefill_step_size: int,
        new_cache: Callable[[], list[Any]],
    ) -> None:
        """`new_cache`: an empty cache for a sequence that starts without an entry."""
        self.model = model
        self.stop_tokens = frozenset(stop_tokens)
        self.prefill_step_size = prefill_step_size
        self.new_cache = new_cache
        self.prompt_ends = False
        self._stream = mx.new_stream(mx.default_device())
        self._queue: deque[Admission] = deque()
        self._running: SoloSequence | None = None

    @property
    def stream(self) -> Any:
        return self._stream

    def admit(self, admission: Admission) -> None:
        if not admission.prompt:
            raise ValueError("an empty prompt")
        if admission.embeddings is not None:
            raise ValueError("this scheduler takes token ids only")
        self._queue.append(admission)

    def _start(self, admission: Admission) -> SoloSequence:
        return SoloSequence.admitted(
            admission,
            self.model,
            self._stream,
            new_cache=self.new_cache,
            stop_tokens=self.stop_tokens,
            prefill_step_size=self.prefill_step_size,
            logits_processors=admission.logits_processors,
        )

    def step(self) -> StepResult:
        running = self._running
        if running is None:
            if not self._queue:
                return StepResult()
            running = self._running = self._start(self._queue.popleft())
        held = len(running.tokens)
        token = running.step()
        if token is None:
            ends = []
            if self.prompt_ends and running.at_checkpoint:
                # The sequence goes on: the entry is a copy of its cache.
                ends.append(
                    PromptEnd(running.uid, copy.deepcopy(running.cache), list(running.tokens))
                )
            return StepResult(ends, [], len(running.tokens) - held)
        if token.finish_reason is not None:
            self._running = None
        return StepResult([], [token], max(0, len(running.tokens) - held - 1))

    def drop(self, uids: Sequence[int]) -> None:
        gone = set(uids)
        self._queue = deque(a for a in self._queue if a.uid not in gone)
        if self._running is not None and self._running.uid in gone:
            self._running = None

    def extract(self, uids: Sequence[int]) -> dict[int, tuple[list[Any], list[int]]]:
        running = self._running
        if running is None or running.uid not in uids or not running.tokens:
            return {}
        return {running.uid: (copy.deepcopy(running.cache), list(running.tokens))}

    def take_alone(self) -> Alone | None:
        return None  # a lone sequence decodes here as it would alone

    @property
    def nbytes(self) -> int:
        return self._running.nbytes if self._running is not None else 0

    @property
    def waiting(self) -> int:
        running = self._running
        return len(self._queue) + (1 if running is not None and not running.decoding else 0)

    @property
    def decoding(self) -> int:
        running = self._running
        return 1 if running is not None and running.decoding else 0

    @property
    def speculation(self) -> SpeculationCounts | None:
        return None

    def close(self) -> None:
        self._queue.clear()
        self._running = None
