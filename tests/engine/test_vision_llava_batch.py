"""A 1D-RoPE vision family (a random LLaVA) batched on the slots like the Qwen-VL family: image
and text requests decode together, each giving mlx-vlm's own one-at-a-time greedy tokens, and a
resent image prompt reads its prefix, image included, from the prompt cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.models.vision_runtime import load_vision_model
from mlx_responses.service.models.vision_tokens import _processed

from tests.engine.test_vision_serial import _image, _mlx_vlm_greedy
from tests.support.random_llava import IMAGE_TOKEN, build_random_llava

TOKENS = 24
TEXTS = [f"Picture {k}: {IMAGE_TOKEN} what is it?" for k in range(3)]


@pytest.fixture(scope="module")
def llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_llava(tmp_path_factory.mktemp("batch-llava") / "llava")


async def _generate(
    engine: EngineWorker, tokens: list[int], inputs: VisionInputs | None
) -> tuple[list[int], int]:
    """A request's greedy ids and its cached prompt tokens."""
    ids: list[int] = []
    cached = -1
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    async for chunks in engine.submit(tokens, sampling, vision=inputs).batches():
        for chunk in chunks:
            assert chunk.finish_reason in (None, "stop", "length"), chunk.error
            cached = chunk.cached_tokens if cached < 0 else cached
            ids += chunk.token_ids
    return ids, cached


async def test_llava_requests_batch_with_mlx_vlms_greedy_tokens(llava: Path) -> None:
    engine = EngineWorker(lambda: load_vision_model(llava, "llava"), batch_wait=0.05)
    loaded = await engine.start()
    try:
        assert engine.engine == "slots"
        processor = loaded.processor
        prompts: list[tuple[list[int], VisionInputs | None]] = []
        want: list[list[int]] = []
        for k, text in enumerate(TEXTS):
            arrays = _processed(processor, text, [_image(k)])
            tokens = [int(t) for t in arrays["input_ids"][0]]
            prompts.append((tokens, VisionInputs(arrays["pixel_values"], None, (f"{k}:auto",))))
            want.append(
                _mlx_vlm_greedy(loaded.model, processor, tokens, arrays["pixel_values"], TOKENS)
            )
        words = processor.tokenizer.encode("Tell me a story.", add_special_tokens=False)
        prompts.append((words, None))
        want.append(_mlx_vlm_greedy(loaded.model, processor, words, None, TOKENS))
        assert len({tuple(w) for w in want}) == len(want), "images make no difference"
        got = await asyncio.gather(*(_generate(engine, t, i) for t, i in prompts))
        assert [ids for ids, _ in got] == want
        assert engine.stats.max_batch_seen >= 2  # they decoded together
        # The same image prompt again: its prefix, image included, from the prompt cache.
        again, cached = await _generate(engine, *prompts[0])
        assert again == got[0][0]
        assert cached >= len(prompts[0][0]) - 1
        # Another image at the same place shares only the text before it.
        other = _processed(processor, TEXTS[0], [_image(7)])
        tokens = [int(t) for t in other["input_ids"][0]]
        inputs = VisionInputs(other["pixel_values"], None, ("7:auto",))
        ids, cached = await _generate(engine, tokens, inputs)
        assert cached <= tokens.index(loaded.model.config.image_token_index)
        pixels = other["pixel_values"]
        assert ids == _mlx_vlm_greedy(loaded.model, processor, tokens, pixels, TOKENS)
    finally:
        engine.stop()
