"""gemma2 batched: mlx-lm 0.32's attention adds a 4-D mask to 5-D scores, which a batch of
more than one row cannot broadcast (`engine/model_fixes.py` gives the mask the repeats axis);
the slots handed it the string "causal" where it asks for an array mask."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm import batch_generate, load
from mlx_lm.generate import generate_step

from tests.support.engine import generate, greedy

PROMPTS = ["Hello there, how are you doing today?", "Count to ten", "Why is the sky blue?", "abc"]
TOKENS = 8


@pytest.mark.parametrize("engine", ["slots", "batch"])
async def test_four_at_once_equal_mlx_lm_alone(
    engine: str, zoo_model: Callable[[str], Path]
) -> None:
    path = zoo_model("gemma2")
    model, tokenizer = load(str(path))[:2]
    expected = [
        tuple(
            int(t)
            for t, _ in generate_step(mx.array(tokenizer.encode(p)), model, max_tokens=TOKENS)
        )
        for p in PROMPTS
    ]
    together, _ = await generate(path, greedy(PROMPTS, TOKENS), turns=2, engine=engine)
    assert together == expected
    # One prompt prefilled by the scheduler itself (not the solo path): one row, several
    # positions (the slots' "causal" mask).
    alone, _ = await generate(path, greedy(PROMPTS[:1], TOKENS), engine=engine, solo=False)
    assert alone == expected[:1]


async def test_unpatched_gemma2_fails_batched(
    zoo_model: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path without the fix fails, in our batch and in mlx-lm's own (upstream's bug)."""
    path = zoo_model("gemma2")
    model, tokenizer = load(str(path))[:2]
    with pytest.raises(ValueError, match="broadcast_shapes"):
        batch_generate(model, tokenizer, [tokenizer.encode(p) for p in PROMPTS], max_tokens=2)
    monkeypatch.setattr("mlx_responses.service.engine.model.fix_model", lambda model: None)
    with pytest.raises(AssertionError, match="broadcast_shapes"):
        await generate(path, greedy(PROMPTS, TOKENS), engine="batch")
