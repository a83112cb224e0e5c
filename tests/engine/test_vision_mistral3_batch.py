"""Mistral 3 (Mistral Small 3.1/3.2: a random one, Pixtral tower and Mistral language side)
batched on the slots like LLaVA: image prompts of several sizes (one with two images) and a text
prompt decode together, prefilled in chunks that cut through their images, each giving mlx-vlm's
own one-at-a-time greedy tokens; Ministral 3's language side stays on the serial path."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.vision.side import ImageEncoder, VisionSide
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.models.vision_runtime import load_vision_model
from mlx_responses.service.models.vision_tokens import _processed
from PIL import Image

from tests.engine.test_vision_llava_batch import TOKENS, _generate
from tests.engine.test_vision_serial import _mlx_vlm_greedy
from tests.support.random_mistral3 import IMAGE, build_random_mistral3

# (height, width) of each prompt's pictures: 2x3, 4x2 and 1x4 image tokens, then two at once.
SIZES = [[(40, 60)], [(100, 50)], [(20, 110)], [(60, 60), (30, 90)]]


@pytest.fixture(scope="module")
def mistral3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_mistral3(tmp_path_factory.mktemp("batch-mistral3") / "mistral3")


def _picture(seed: int, size: tuple[int, int]) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (*size, 3), dtype=np.uint8))


def _prompt(
    processor: Any, k: int, sizes: list[tuple[int, int]], lead: str = "Picture"
) -> tuple[list[int], VisionInputs]:
    """Prompt k's tokens and inputs: its pictures (seeded by k) in a short text."""
    pictures = [_picture(10 * k + j, size) for j, size in enumerate(sizes)]
    text = f"{lead} {k}: " + " and ".join([IMAGE] * len(pictures)) + " what is it?"
    arrays = _processed(processor, text, pictures)
    extra = {"image_sizes": arrays["image_sizes"]}
    keys = tuple(f"{k}.{j}:auto" for j in range(len(pictures)))
    return [int(t) for t in arrays["input_ids"][0]], VisionInputs(
        arrays["pixel_values"], None, keys, extra
    )


def _mlx_vlm(folder: Path) -> tuple[Any, Any]:
    """The model and processor loaded by mlx-vlm on this thread (the engine's copy holds
    arrays made lazily on its own thread: the vision tower's rotary table)."""
    from mlx_vlm import load

    return load(str(folder))


def _alone(reference: tuple[Any, Any], tokens: list[int], inputs: VisionInputs | None) -> list[int]:
    """mlx-vlm's own greedy tokens for a prompt, its `image_sizes` passed."""
    model, processor = reference
    if inputs is None:
        return _mlx_vlm_greedy(model, processor, tokens, None, TOKENS)
    return _mlx_vlm_greedy(
        model, processor, tokens, inputs.pixel_values, TOKENS, extra=inputs.extra
    )


async def test_mistral3_requests_batch_with_mlx_vlms_greedy_tokens(mistral3: Path) -> None:
    reference = _mlx_vlm(mistral3)
    prompts: list[tuple[list[int], VisionInputs | None]] = [
        _prompt(reference[1], k, sizes) for k, sizes in enumerate(SIZES)
    ]
    words = reference[1].tokenizer.encode("Tell me a story.", add_special_tokens=False)
    prompts.append((words, None))
    want = [_alone(reference, *prompt) for prompt in prompts]
    assert len({tuple(w) for w in want}) == len(want), "images make no difference"
    engine = EngineWorker(
        lambda: load_vision_model(mistral3, "mistral3"),
        batch_wait=0.05,
        prefill_step_size=5,  # every image prefilled over several chunks
        max_prefill_tokens_per_step=8,
    )
    await engine.start()
    try:
        assert engine.engine == "slots"
        got = await asyncio.gather(*(_generate(engine, t, i) for t, i in prompts))
        assert [ids for ids, _ in got] == want
        assert engine.stats.max_batch_seen == len(prompts)  # they decoded together
        stats = engine.encoder.stats
        assert (stats.misses, stats.hits, stats.tower_calls, stats.entries) == (5, 0, 5, 5)
        # The two-image prompt again: its prefix, images included, from the prompt cache.
        again, cached = await _generate(engine, *prompts[3])
        assert again == want[3]
        assert cached >= len(prompts[3][0]) - 1
        assert (stats.misses, stats.hits) == (5, 0)  # no tower
        # The first picture in another text: past the prompt cache, its encoding from the
        # image cache (by content), and the tokens mlx-vlm gives it.
        other = _prompt(reference[1], 0, SIZES[0], lead="Another look at")
        ids, cached = await _generate(engine, *other)
        image_token = reference[0].config.image_token_index
        assert cached < other[0].index(image_token)
        assert (stats.misses, stats.hits, stats.tower_calls) == (5, 1, 5)
        assert ids == _alone(reference, *other)
    finally:
        engine.stop()


async def test_ministral3_is_served_one_at_a_time(tmp_path: Path) -> None:
    """Ministral 3's language side (text `ministral3`: its attention scale from the first row's
    cache offset) is not batched: its requests decode serially, with mlx-vlm's own tokens."""
    folder = build_random_mistral3(tmp_path / "ministral3", text="ministral3")
    reference = _mlx_vlm(folder)
    prompts = [_prompt(reference[1], k, sizes) for k, sizes in enumerate(SIZES[:2])]
    want = [_alone(reference, *prompt) for prompt in prompts]
    engine = EngineWorker(lambda: load_vision_model(folder, "ministral3"), batch_wait=0.05)
    loaded = await engine.start()
    try:
        assert engine.engine == "serial"
        side = VisionSide.of(loaded, ImageEncoder())
        assert side is not None and not side.batched
        got = await asyncio.gather(*(_generate(engine, t, i) for t, i in prompts))
        assert [ids for ids, _ in got] == want
        assert engine.stats.max_batch_seen == 1
    finally:
        engine.stop()
