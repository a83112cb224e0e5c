"""Which vision-language models the slots batch (the Qwen-VL family), and that every other
family is served one sequence at a time (`vision/serial.py`), chosen by the side's capability."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mlx_responses.service.engine.requests import EngineStats
from mlx_responses.service.engine.schedulers import new_scheduler
from mlx_responses.service.engine.vision.serial import VisionSerialScheduler
from mlx_responses.service.engine.vision.side import ImageEncoder, VisionSide
from mlx_responses.service.flags import Prefill


class _Gemma:
    config = SimpleNamespace(model_type="gemma3", image_token_index=262144)
    language_model = object()

    def get_input_embeddings(self) -> None: ...


class _Qwen3VL:
    """Qwen3-VL's config as mlx-vlm loads it (the language side: no layers needed here)."""

    config = SimpleNamespace(
        model_type="qwen3_vl",
        image_token_id=151655,
        vision_start_token_id=151652,
        vision_config=SimpleNamespace(spatial_merge_size=2),
    )
    language_model = SimpleNamespace(model=SimpleNamespace(layers=[]))

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
    assert isinstance(scheduler, VisionSerialScheduler)
    assert not scheduler.takes_embeddings and scheduler.take_alone() is None


def test_qwen3_vl_is_batched_on_the_slots_with_m_rope_positions() -> None:
    """Its deepstack features ride in the prefill chunks (vision/deepstack.py): the slots
    drive its language side, positioned as Qwen2-VL's."""
    side = VisionSide.of(_loaded(_Qwen3VL()), ImageEncoder())
    assert side is not None
    assert side.batched and side.language is not None and side.image_token == 151655
    assert side.mrope is not None and (side.mrope.vision_start, side.mrope.merge) == (151652, 2)


class _Mistral3:
    """mlx-vlm's `mistral3`, its language side by its text config's `model_type`."""

    language_model = SimpleNamespace(model=SimpleNamespace(layers=[]))

    def __init__(self, text: str) -> None:
        self.config = SimpleNamespace(
            model_type="mistral3",
            image_token_index=10,
            text_config=SimpleNamespace(model_type=text),
        )

    def get_input_embeddings(self) -> None: ...


def test_mistral_small_is_batched_with_1d_positions_and_ministral_3_is_not() -> None:
    """Mistral Small 3.1/3.2 (a plain Mistral: 1D RoPE from the cache offset) on the slots;
    Ministral 3 (an attention scale from the first row's cache offset) and Mistral 4 (MLA)
    one at a time."""
    side = VisionSide.of(_loaded(_Mistral3("mistral")), ImageEncoder())
    assert side is not None and side.batched and side.language is not None
    assert (side.mrope, side.image_token) == (None, 10)
    for text in ("ministral3", "mistral4"):
        side = VisionSide.of(_loaded(_Mistral3(text)), ImageEncoder())
        assert side is not None and (side.batched, side.language) == (False, None)


def test_a_text_model_has_no_vision_side() -> None:
    assert VisionSide.of(_loaded(object()), ImageEncoder()) is None
