"""What a request admitted from the queue (`admission.py`) starts from, before the scheduler
takes it: its prompt-cache lookup (its longest cached prefix; an image request's key stands for
its images, `vision/side.py`), its images' encodings, and the `Admission` it becomes.

The requests admitted in one pass of the worker's loop are looked up together, then the images
of those that need the vision tower go through it in one call (`encode_together`), not one
call per request between decode steps; the scheduler then prefills them together in its next
step (up to its prefill batch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.commands import Submit
from mlx_responses.service.engine.kv_store import KVStore
from mlx_responses.service.engine.penalties import reads_context_only
from mlx_responses.service.engine.scheduler import Admission, Sampler, segments
from mlx_responses.service.engine.vision.side import Seen, VisionSide, encode_together, see


@dataclass
class Start:
    """An admitted request as uid `uid`: its `Seen` (None for text), prompt-cache key, the entry
    found (None: none) and the prompt tokens it holds, and its images' encodings when they were
    made together with others'."""

    command: Submit
    uid: int
    seen: Seen | None
    key: list[int]
    cache: list[Any] | None
    cached: int
    features: mx.array | None = None

    def admission(
        self, sampler: Sampler, splits: Sequence[int], alone: bool, cache: list[Any] | None
    ) -> Admission:
        """The sequence the scheduler takes: the prompt past `cache` (its entry, or a fresh
        quantized one), cut at `splits` (checkpoints past the cached prefix)."""
        command, cached, s = self.command, self.cached, self.command.sampling
        return Admission(
            self.uid,
            segments(command.prompt[cached:], list(splits)),
            s.max_tokens,
            sampler,
            command.logits_processors,
            cache,
            command.prompt[:cached],
            # Greedy and sampled sequences speculate (`acceptance.py` keeps a sampled one's
            # distribution), with penalties too; a grammar or a reasoning budget keeps state
            # per token: those sequences decode normally in the same step.
            speculate=reads_context_only(command.logits_processors),
            alone=alone,
            **(self.seen.admitted(cached, self.features) if self.seen is not None else {}),
        )


def look_up(
    admitted: Sequence[tuple[Submit, int]],
    vision: VisionSide | None,
    kv: KVStore,
    failed: Callable[[Submit, Exception], None],
) -> list[Start]:
    """The requests admitted together, each with its prompt-cache entry and, for those that
    need them, their images' encodings (one call of the tower); a request that fails here goes
    to `failed` and is left out."""
    starts: list[Start] = []
    for command, uid in admitted:
        try:
            seen, key = see(vision, command.prompt, command.vision)
            cache, rest = kv.fetch(key, command.scope)
        except Exception as exc:
            failed(command, exc)
            continue
        starts.append(Start(command, uid, seen, key, cache, len(command.prompt) - len(rest)))
    features = encode_together([(start.seen, start.cached) for start in starts])
    for start, encoded in zip(starts, features, strict=True):
        start.features = encoded
    return starts
