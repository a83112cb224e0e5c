"""Image requests admitted together: their images go through the vision tower in one call (not
one call per request between decode steps), and each request decodes what it decodes alone; an
image twice among them is encoded once. On the tests' tiny random Qwen2-VL and Qwen2.5-VL (whose
tower attends within windows of each image: one call over several images still gives each what
a call of its own gives)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.memory.budget import MemoryBudget
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.vision.encoder import ImageEncoder
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.models.vision_runtime import load_vision_model
from PIL import Image

from tests.support.engine import collect
from tests.support.random_vlm import IMAGE_PART, build_random_vlm
from tests.support.wide_tower import wide_image, wide_model

TOKENS = 12
# (seed, width, height) of each request's images: sizes differ, so do their grids; the last
# request's second image is the first request's.
IMAGES = (((1, 100, 60),), ((2, 56, 56),), ((3, 112, 90),), ((4, 84, 84), (1, 100, 60)))


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen2_5_vl"])
def vlm(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    folder = tmp_path_factory.mktemp(f"admitted-{request.param}") / "vlm"
    return build_random_vlm(folder, family=request.param)


def _prompt(processor: Any, sizes: tuple[tuple[int, int, int], ...]) -> tuple[list[int], Any]:
    images = [
        Image.fromarray(
            np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)
        )
        for seed, width, height in sizes
    ]
    parts = " and ".join(f"picture {k} {IMAGE_PART}" for k in range(len(sizes)))
    text = f"<|im_start|>user\nCompare {parts}.<|im_end|>\n<|im_start|>assistant\n"
    out = processor(text=[text], images=images, return_tensors="np", add_special_tokens=False)
    arrays = {key: np.array(value) for key, value in out.items()}
    keys = tuple(f"{seed}:auto" for seed, _, _ in sizes)
    inputs = VisionInputs(arrays["pixel_values"], arrays["image_grid_thw"], keys)
    return [int(t) for t in arrays["input_ids"][0]], inputs


async def _serve(vlm: Path, together: bool) -> tuple[list[tuple[int, ...]], ImageEncoder]:
    """`IMAGES`' requests and a text one on a fresh engine, submitted together (gathered by
    the idle engine's batch wait) or one after another: their greedy ids, and the encoder."""
    encoder = ImageEncoder()
    engine = EngineWorker(lambda: load_vision_model(vlm, "vlm"), batch_wait=0.05, encoder=encoder)
    loaded = await engine.start()
    try:
        assert engine.engine == "slots"
        prompts = [_prompt(loaded.processor, sizes) for sizes in IMAGES]
        prompts.append((loaded.tokenizer.encode("Tell me a story."), None))
        sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
        if together:
            streams = [engine.submit(ids, sampling, vision=inputs) for ids, inputs in prompts]
            outputs = list(await asyncio.gather(*(collect(stream) for stream in streams)))
            assert engine.stats.max_batch_seen == len(prompts)
        else:
            outputs = [
                await collect(engine.submit(ids, sampling, vision=inputs))
                for ids, inputs in prompts
            ]
        return outputs, encoder
    finally:
        engine.stop()


async def test_images_admitted_together_go_through_the_tower_in_one_call(vlm: Path) -> None:
    alone, one_by_one = await _serve(vlm, together=False)
    # One call per image request (the repeated image is a hit the second time).
    assert (one_by_one.stats.tower_calls, one_by_one.stats.misses) == (4, 4)
    assert one_by_one.stats.hits == 1
    outputs, encoder = await _serve(vlm, together=True)
    assert outputs == alone
    # The four requests' five images in one call: four distinct, one of them twice.
    assert (encoder.stats.tower_calls, encoder.stats.misses, encoder.stats.hits) == (1, 4, 1)
    assert len({ids for ids in outputs}) == len(outputs), "images make no difference"


async def test_the_encodings_count_in_the_models_memory_account(vlm: Path) -> None:
    """The engine's KV store holds its encoder: the cached encodings' bytes are in the model's
    account (the budget admits by them), and leave with the model."""
    budget = MemoryBudget(1 << 40, measure_runtime=lambda: 0)
    encoder = ImageEncoder()
    engine = EngineWorker(lambda: load_vision_model(vlm, "vlm"), encoder=encoder, memory=budget)
    loaded = await engine.start()
    try:
        ids, inputs = _prompt(loaded.processor, IMAGES[3])
        await collect(engine.submit(ids, SamplingParams(max_tokens=2), vision=inputs))
        account = engine.kv.account
        assert account is not None
        assert encoder.stats.entries == 2 and encoder.nbytes > 0
        assert account.image_cache == encoder.nbytes == encoder.stats.bytes
        assert budget.by_model()["vlm"]["image_cache"] == encoder.nbytes
        await engine.unload()
        assert encoder.nbytes == 0 and not budget.by_model()
    finally:
        engine.stop()


def test_images_encoded_together_are_each_as_encoded_alone(vlm: Path) -> None:
    loaded = load_vision_model(vlm, "vlm")
    prompts = [_prompt(loaded.processor, sizes)[1] for sizes in IMAGES]
    together = ImageEncoder()
    batch = together.encode(loaded.model, prompts)
    alone = [ImageEncoder().encode(loaded.model, [inputs])[0] for inputs in prompts]
    assert together.stats.tower_calls == 1
    for got, want in zip(batch, alone, strict=True):
        assert got is not None and want is not None
        assert got.shape == want.shape
        assert mx.allclose(got, want, atol=1e-5).item()


def test_an_image_encoded_with_others_holds_only_its_own_memory() -> None:
    """The cache keeps one entry: of four images encoded in one call, the last, whose memory
    is its own share of the call's output (a slice of it held all four)."""
    model = wide_model()
    prompts = [wide_image(k) for k in range(4)]
    encoder = ImageEncoder(entries=1)
    mx.clear_cache()
    before = mx.get_active_memory()
    encoded = encoder.encode(model, prompts)
    assert encoder.stats.tower_calls == 1 and encoder.stats.entries == 1
    assert [int(e[0, 0].item()) for e in encoded if e is not None] == [0, 1, 2, 3]
    del encoded
    one_image = 256 * 4096 * 4
    assert mx.get_active_memory() - before < 1.5 * one_image
