"""Which scheduler serves a model (`--engine`, `--speculative`, `--kv-bits`), built in one place.

The worker drives whatever this returns through `scheduler.Scheduler` alone: the slots or
mlx-lm's batch, with the solo path in front of either when lone sequences may decode alone
(with n-gram drafts too, `solo/drafting.py`; not with a draft model or a drafting head,
which the solo path does not run), or one sequence at a time for an architecture mlx-lm's
batch decodes wrong (`architectures.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.architectures import why_not_batched
from mlx_responses.service.engine.batch.scheduler import BatchScheduler
from mlx_responses.service.engine.draft_model import DraftedModel
from mlx_responses.service.engine.requests import EngineStats
from mlx_responses.service.engine.scheduler import Scheduler
from mlx_responses.service.engine.slots import SlotScheduler, layer_windows, slots_serve
from mlx_responses.service.engine.solo import SoloScheduler, TextSerialScheduler
from mlx_responses.service.engine.solo.drafting import SoloDrafts
from mlx_responses.service.engine.speculation import SpeculationPolicy
from mlx_responses.service.engine.vision.serial import VisionSerialScheduler
from mlx_responses.service.engine.vision.side import VisionSide
from mlx_responses.service.flags import Prefill

log = logging.getLogger(__name__)

ENGINES = ("batch", "slots")
# What schedules each engine's sequences (the startup log's words); "serial": one sequence at a
# time (a vision model of a family the slots do not batch: mlx-vlm's own step; a text model
# mlx-lm's batch decodes wrong: mlx-lm's generate_step).
SCHEDULED_BY = {
    "slots": "fixed KV slots",
    "batch": "mlx-lm's BatchGenerator",
    "serial": "one sequence at a time",
}


def resolve_engine(engine: str, model: Any, device: str) -> str:
    """ "batch" or "slots" for `--engine` (`engine`) on `model` and `device` ("cpu", "gpu").

    `auto`: our fixed slots where they are measured faster and serve everything asked (a CPU;
    plain caches or one window on every layer; with speculation or quantized KV too), else
    mlx-lm's batch. NOTE: windows that differ between layers (gemma3's, gpt-oss's) run on the
    slots when asked, but `auto` keeps the batch for them: measured on par at one stream and
    6% more CPU at 8 (docs/performance.md); a GPU keeps mlx-lm's BatchGenerator until the
    slots are measured on one. "serial" where neither serves the model right: the slots cannot
    hold its caches and mlx-lm's batch decodes it wrong (`architectures.py`). Raises ConfigError
    for "slots" on a model they cannot hold.
    """
    if (why := why_not_batched(model)) is not None:
        if engine == "slots":
            raise ConfigError(f"--engine slots batches, and this architecture cannot be: {why}")
        return "serial"
    fits = slots_serve(model)
    if engine == "auto":
        one_window = fits and len(set(layer_windows(model))) == 1
        return "slots" if one_window and device == "cpu" else "batch"
    if engine == "slots" and not fits:
        raise ConfigError(
            "--engine slots needs plain KV caches or sliding windows (keeping no first tokens) "
            "on every layer; this model has recurrent layers or other caches (use --engine batch)"
        )
    return engine


def speculation_for(engine: str, speculative: str, alias: str) -> str:
    """`--speculative` as `engine` takes it: "off" on one sequence at a time (a startup
    warning, as for --kv-bits: the flag is a speed hint)."""
    if engine != "serial" or speculative == "off":
        return speculative
    log.warning("--speculative %s has no effect on %s: one sequence at a time", speculative, alias)
    return "off"


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
    vision: VisionSide | None = None,
) -> Scheduler:
    """A scheduler for `engine` ("batch" or "slots") over `model` (a `DraftedModel` pair with
    a draft model); `kv`: (bits, group) of quantized KV slots; `solo`: lone sequences decode
    alone (`solo/`). A vision model of a family the slots do not batch (`vision.batched`
    false) decodes one sequence at a time, as mlx-vlm does (`vision/serial.py`)."""
    if vision is not None and not vision.batched:
        return VisionSerialScheduler(
            vision.model,
            n_tokens=vision.n_tokens,
            stop_tokens=stop_tokens,
            prefill_step_size=prefill_step_size,
        )
    if engine == "serial":
        return TextSerialScheduler(
            model,
            stop_tokens=stop_tokens,
            prefill_step_size=prefill_step_size,
            new_cache=new_cache,
        )
    speculate = speculative in ("ngram", "draft", "mtp", "eagle3", "dflash")
    drafted = model if isinstance(model, DraftedModel) else None
    behind: Scheduler
    if engine == "slots":
        behind = SlotScheduler(
            model,
            stop_tokens=sorted(stop_tokens),
            completion_batch_size=max_batch_size,
            prefill_batch_size=prefill.batch_size,
            prefill_step_size=prefill_step_size,
            speculation=SpeculationPolicy(num_draft_tokens, drafted) if speculate else None,
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
    if not solo or (speculate and speculative != "ngram"):
        return behind  # a model drafter (a draft model, a head) drafts behind
    return SoloScheduler(
        behind,
        model,
        stop_tokens=stop_tokens,
        prefill_step_size=prefill_step_size,
        new_cache=new_cache,
        stats=stats,
        drafts=SoloDrafts(num_draft_tokens) if speculative == "ngram" else None,
    )
