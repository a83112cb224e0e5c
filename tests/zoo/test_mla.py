"""Multi-head latent attention (deepseek_v3: values narrower than keys) on the slots: four
requests at once each equal to itself alone (before: the store sized values as keys and the
first write failed, `(1,1,44,16)` vs `(1,1,44,32)`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.schedulers import resolve_engine

from tests.support.engine import generate, greedy

PROMPTS = ["Hello there, how are you doing today?", "Count to ten", "Why is the sky blue?", "abc"]
TOKENS = 8


@pytest.mark.parametrize("model_type", ["deepseek_v3", "glm4_moe_lite"])
async def test_four_at_once_on_the_slots_equal_each_alone(
    model_type: str, zoo_model: Callable[[str], Path]
) -> None:
    path = zoo_model(model_type)
    model, tokenizer = load(str(path))[:2]
    cache = make_prompt_cache(model)
    model(mx.array(tokenizer.encode("abc"))[None], cache=cache)
    assert cache[0].keys.shape[-1] != cache[0].values.shape[-1]  # what this test is about
    assert resolve_engine("auto", model, "cpu") == "slots"
    expected = [
        tuple(
            int(t)
            for t, _ in generate_step(mx.array(tokenizer.encode(p)), model, max_tokens=TOKENS)
        )
        for p in PROMPTS
    ]
    together, stats = await generate(path, greedy(PROMPTS, TOKENS), turns=2, engine="slots")
    assert together == expected
    assert stats.prompt_cache_hits >= 1
    alone, _ = await generate(path, greedy(PROMPTS[:1], TOKENS), engine="slots", solo=False)
    assert alone == expected[:1]
