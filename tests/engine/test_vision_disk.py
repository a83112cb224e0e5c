"""An image prompt's prompt-cache entries outlive the process: a restarted engine over the same
prompt-cache folder reads the prefix, image included, from disk (its key: the image's content),
and decodes what the first engine decoded; another image at the same place is not served."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.prompt_cache.disk import BLOCK
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.models.vision_runtime import load_vision_model
from PIL import Image

from tests.support.random_vlm import IMAGE_PART, build_random_vlm

TOKENS = 8
TEXT = "Look at every corner of this picture and tell me what you see there. " * 12


@pytest.fixture(scope="module")
def vlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_vlm(tmp_path_factory.mktemp("disk-vlm") / "vlm")


def _prompt(processor: Any, seed: int) -> tuple[list[int], VisionInputs]:
    pixels = np.random.default_rng(seed).integers(0, 256, (84, 84, 3), dtype=np.uint8)
    text = f"<|im_start|>user\n{TEXT}{IMAGE_PART}What is it?<|im_end|>\n<|im_start|>assistant\n"
    out = processor(
        text=[text], images=[Image.fromarray(pixels)], return_tensors="np", add_special_tokens=False
    )
    arrays = {key: np.array(value) for key, value in out.items()}
    tokens = [int(t) for t in arrays["input_ids"][0]]
    assert len(tokens) > BLOCK
    inputs = VisionInputs(arrays["pixel_values"], arrays["image_grid_thw"], (f"{seed}:auto",))
    return tokens, inputs


async def _serve(path: Path, folder: Path, seeds: list[int]) -> list[tuple[tuple[int, ...], int]]:
    """Each seed's image prompt in turn on a fresh engine: its greedy ids and cached tokens."""
    engine = EngineWorker(
        lambda: load_vision_model(path, "vlm"),
        prompt_cache_dir=folder,
        prompt_cache_disk_bytes=1 << 30,
    )
    loaded = await engine.start()
    out = []
    try:
        for seed in seeds:
            tokens, inputs = _prompt(loaded.processor, seed)
            sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
            ids: tuple[int, ...] = ()
            cached = -1
            async for chunks in engine.submit(tokens, sampling, vision=inputs).batches():
                for chunk in chunks:
                    assert chunk.finish_reason in (None, "stop", "length"), chunk.error
                    cached = chunk.cached_tokens if cached < 0 else cached
                    ids += chunk.token_ids
            out.append((ids, cached))
        assert engine.kv.prompt is not None and engine.kv.prompt.disk is not None
        engine.kv.prompt.disk.flush()
    finally:
        engine.stop()
    return out


async def test_a_restart_reads_the_image_prefix_from_disk(vlm: Path, tmp_path: Path) -> None:
    ((cold, nothing),) = await _serve(vlm, tmp_path, [1])
    (again, from_disk), (_, shared) = await _serve(vlm, tmp_path, [1, 2])
    assert nothing == 0
    assert again == cold
    assert from_disk >= BLOCK  # whole blocks of the prompt, its image among them
    image_at = len(_text_tokens(vlm))
    assert shared <= image_at < from_disk  # another image: at most the text before it


def _text_tokens(path: Path) -> list[int]:
    """The prompt's tokens before its image's (the same for every seed)."""
    from mlx_vlm import load

    _, processor = load(str(path))
    tokens, _ = _prompt(processor, 1)
    image = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    return tokens[: tokens.index(image)]
