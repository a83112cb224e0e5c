"""Which vision-language models the slots batch (the Qwen-VL family), and that every other
family is served one sequence at a time (`vision/serial.py`), chosen by the side's capability."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mlx_responses.service.engine.requests import EngineStats
from mlx_responses.service.engine.schedulers import new_scheduler
from mlx_responses.service.engine.vision.serial import SerialScheduler
from mlx_responses.service.engine.vision.side import ImageEncoder, VisionSide
from mlx_responses.service.flags import Prefill


class _Gemma:
    config = SimpleNamespace(model_type="gemma3", image_token_index=262144)
    language_model = object()

    def get_input_embeddings(self) -> None: ...


def _loaded(model: Any) -> Any:
    return SimpleNamespace(model=model, path=Path("/models/m"), tokenizer=[0] * 10)


def test_a_vision_model_outside_the_qwen_vl_family_is_served_one_at_a_time() -> None:
    """Another family is not refused (before the slots served images, every mlx-vlm family
    was served): its side does not batch, and its scheduler is the serial one."""
    side = VisionSide.of(_loaded(_Gemma()), ImageEncoder())
    assert side is not None
    assert (side.batched, side.language, side.image_token) == (False, None, 262144)
    scheduler = new_scheduler(
        "slots",
        side.model,
        stop_tokens={1},
        max_batch_size=8,
        prefill=Prefill(batch_size=4, tokens_per_step=512),
        prefill_step_size=64,
        speculative="off",
        num_draft_tokens=4,
        kv=None,
        solo=True,
        stats=EngineStats(),
        new_cache=list,
        vision=side,
    )
    assert isinstance(scheduler, SerialScheduler)
    assert not scheduler.takes_embeddings and scheduler.take_alone() is None


def test_a_text_model_has_no_vision_side() -> None:
    assert VisionSide.of(_loaded(object()), ImageEncoder()) is None
