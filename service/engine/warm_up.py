"""A short generation when the model loads, so the first request runs as fast as the next.

A process's first request pays one-time costs the next ones do not: the first prefill and
decode steps of each scheduler (the solo path, the slots or the batch, and their buffers),
MLX's compiled functions (the sampler's) and the first pass of a grammar's mask. A server
restarted under a coding agent pays them on the agent's next turn, which the prompt cache's disk
tier otherwise serves as fast as memory would (#38). The model runtime (service/models/
runtime.py) renders a small conversation with a tool and compiles its tool grammar, then hands
the prompt to the worker (`EngineWorker.warm_up`), which admits it on the MLX thread, through
the scheduler requests use, before the model serves (nothing else is running), and runs it here
(`warm`). It leaves nothing behind: no prompt-cache entry, no metrics, the engine's counters as
they were.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass, field

from mlx_responses.service.engine.requests import EngineStats, LogitsProcessor
from mlx_responses.service.engine.scheduler import Admission, Scheduler

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


def warm(
    scheduler: Scheduler,
    admission: Admission,
    done: concurrent.futures.Future[float],
    stats: EngineStats,
) -> None:
    """Runs `admission` (at most MAX_TOKENS tokens) through `scheduler` to its end, or drops it
    after MAX_STEPS steps, then puts `stats` back as they were; sets the seconds it took on
    `done`. A warm-up that fails is logged: it costs the first request its time, no more."""
    started = time.perf_counter()
    saved = dataclasses.replace(stats)
    uid = admission.uid
    try:
        scheduler.admit(admission)
        for _ in range(MAX_STEPS):
            tokens = scheduler.step().tokens
            if any(t.uid == uid and t.finish_reason is not None for t in tokens):
                break
        else:
            scheduler.drop([uid])
    except Exception:
        log.exception("the engine's warm-up failed")
        with contextlib.suppress(Exception):
            scheduler.drop([uid])
    finally:
        for name, value in vars(saved).items():
            setattr(stats, name, value)
        done.set_result(time.perf_counter() - started)
