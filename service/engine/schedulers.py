"""Which scheduler serves a model (`--engine`, `--speculative`, `--kv-bits`), built in one place.

The worker drives whatever this returns through `scheduler.Scheduler` alone: the slots or
mlx-lm's batch, with the solo path in front of either when lone sequences may decode alone
(not while speculating: the solo path does not draft).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from mlx_responses.service.engine.batch.scheduler import BatchScheduler
from mlx_responses.service.engine.draft_model import DraftedModel
from mlx_responses.service.engine.requests import EngineStats
from mlx_responses.service.engine.scheduler import Scheduler
from mlx_responses.service.engine.slots import SlotScheduler, SlotSpeculation
from mlx_responses.service.engine.solo import SoloScheduler
from mlx_responses.service.flags import Prefill

ENGINES = ("batch", "slots")


def choose_engine(slots_fit: bool, device: str) -> str:
    """`--engine auto`: our fixed slots where they are measured faster and serve everything
    asked (a CPU; the model's caches are ones they hold: `slots_fit`; with speculation or
    quantized KV too), else mlx-lm's batch.

    NOTE: a GPU keeps mlx-lm's BatchGenerator until the slots are measured on one.
    """
    return "slots" if slots_fit and device == "cpu" else "batch"


def new_scheduler(
    engine: str,
    model: Any,
    *,
    stop_tokens: Collection[int],
    max_batch_size: int,
    prefill: Prefill,
    prefill_step_size: int,
    speculative: str,
    num_draft_tokens: int,
    kv: tuple[int, int] | None,
    solo: bool,
    stats: EngineStats,
    new_cache: Callable[[], list[Any]],
) -> Scheduler:
    """A scheduler for `engine` ("batch" or "slots") over `model` (a `DraftedModel` pair with
    a draft model); `kv`: (bits, group) of quantized KV slots; `solo`: lone sequences decode
    alone (`solo/`)."""
    speculate = speculative in ("ngram", "draft")
    drafted = model if isinstance(model, DraftedModel) else None
    behind: Scheduler
    if engine == "slots":
        behind = SlotScheduler(
            model,
            stop_tokens=sorted(stop_tokens),
            completion_batch_size=max_batch_size,
            prefill_batch_size=prefill.batch_size,
            prefill_step_size=prefill_step_size,
            speculation=SlotSpeculation(num_draft_tokens, drafted) if speculate else None,
            kv_bits=kv[0] if kv is not None else None,
            kv_group=kv[1] if kv is not None else None,
        )
    else:
        behind = BatchScheduler(
            model,
            stop_tokens=stop_tokens,
            completion_batch_size=max_batch_size,
            prefill_batch_size=prefill.batch_size,
            prefill_step_size=prefill_step_size,
            speculate=speculate,
            num_draft_tokens=num_draft_tokens,
        )
    if not solo or speculate:
        return behind
    return SoloScheduler(
        behind,
        model,
        stop_tokens=stop_tokens,
        prefill_step_size=prefill_step_size,
        new_cache=new_cache,
        stats=stats,
    )
