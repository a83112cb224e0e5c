"""Architectures mlx-lm's batch decodes wrong or cannot hold decode one sequence at a time
(`engine/architectures.py`, `solo/serial.py`): four at once and a second turn from the prompt
cache equal mlx-lm's own `generate_step`, token for token."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm import batch_generate, load
from mlx_lm.generate import generate_step
from mlx_responses.service.engine.architectures import why_not_batched
from mlx_responses.service.engine.schedulers import resolve_engine

from tests.support.engine import generate, greedy

PROMPTS = ["Hello there", "Count to ten please now", "Why is the sky blue?", "abc"]
TOKENS = 8

# afm7: its KV-reusing layers read the batch's left padding; gpt_bigcode: its positions read a
# cache offset as one number; llama4: its chunked caches cannot merge (and once their front is
# dropped they trim wrong: the prompt cache no longer serves such an entry).
SERIAL = ["afm7", "gpt_bigcode", "llama4"]


def _alone(model: object, tokenizer: object, prompts: list[str]) -> list[tuple[int, ...]]:
    return [
        tuple(
            int(t)
            for t, _ in generate_step(
                mx.array(tokenizer.encode(p)),  # type: ignore[attr-defined]
                model,  # type: ignore[arg-type]
                max_tokens=TOKENS,
            )
        )
        for p in prompts
    ]


@pytest.mark.parametrize("model_type", SERIAL)
async def test_one_at_a_time_equals_mlx_lm_alone(
    model_type: str, zoo_model: Callable[[str], Path]
) -> None:
    path = zoo_model(model_type)
    model, tokenizer = load(str(path))[:2]
    assert why_not_batched(model) is not None
    assert resolve_engine("auto", model, "cpu") == resolve_engine("batch", model, "gpu") == "serial"
    expected = _alone(model, tokenizer, PROMPTS)
    together, stats = await generate(path, greedy(PROMPTS, TOKENS), turns=2, engine="auto")
    assert together == expected
    # llama4's turn-end entries hold a dropped front: never served, so no hit (correct tokens).
    assert stats.prompt_cache_hits >= (model_type != "llama4")


def test_mlx_lm_batches_afm7_wrong(zoo_model: Callable[[str], Path]) -> None:
    """Why afm7 is in the table: mlx-lm's own batch_generate differs from its generate_step
    (to report upstream; when this fails, mlx-lm fixed it and the row can go)."""
    model, tokenizer = load(str(zoo_model("afm7")))[:2]
    batched = batch_generate(
        model, tokenizer, [tokenizer.encode(p) for p in PROMPTS], max_tokens=TOKENS
    )
    alone = [tokenizer.decode(list(ids)) for ids in _alone(model, tokenizer, PROMPTS)]
    assert batched.texts != alone
