"""Hybrid and recurrent models serve: alone, four at once and on a second turn, token for token
what mlx-lm's own `generate_step` gives (before: their first request killed the engine, the
solo path counting bytes through `cache.keys`, which an `ArraysCache` and a `CacheList` lack)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_responses.service.engine.cache_bytes import cache_nbytes
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.schedulers import resolve_engine

from tests.support.engine import generate, greedy

PROMPTS = ["Hello there", "Count to ten please", "Why is the sky blue?", "abc"]
TOKENS = 10

# qwen3_5: gated delta (ArraysCache) beside attention; falcon_h1: a CacheList per layer;
# mamba2: recurrent only.
HYBRIDS = ["qwen3_5", "falcon_h1", "mamba2"]


def _mlx_lm(path: Path, prompts: list[str]) -> list[tuple[int, ...]]:
    model, tokenizer = load(str(path))[:2]
    return [
        tuple(
            int(t)
            for t, _ in generate_step(mx.array(tokenizer.encode(p)), model, max_tokens=TOKENS)
        )
        for p in prompts
    ]


@pytest.mark.parametrize("model_type", HYBRIDS)
async def test_hybrid_model_serves_alone_batched_and_cached(
    model_type: str, zoo_model: Callable[[str], Path]
) -> None:
    path = zoo_model(model_type)
    expected = _mlx_lm(path, PROMPTS)
    alone, _ = await generate(path, greedy(PROMPTS[:1], TOKENS), engine="auto")
    assert alone == expected[:1]
    # Four at once (batched: recurrent state per row), then the same four again, each reading
    # its prompt-cache entry.
    together, stats = await generate(path, greedy(PROMPTS, TOKENS), turns=2, engine="auto")
    assert together == expected
    assert stats.prompt_cache_hits >= 1


@pytest.mark.parametrize("model_type", HYBRIDS)
def test_hybrid_model_gets_the_batch_and_counts_its_bytes(
    model_type: str, zoo_model: Callable[[str], Path]
) -> None:
    model, tokenizer = load(str(zoo_model(model_type)))[:2]
    assert resolve_engine("auto", model, "cpu") == "batch"
    cache = make_prompt_cache(model)
    assert cache_nbytes(cache) == 0
    model(mx.array(tokenizer.encode("Hello there"))[None], cache=cache)
    held = [a for c in cache for a in _leaves(c.state)]
    assert cache_nbytes(cache) == sum(a.nbytes for a in held) > 0


def _leaves(state: object) -> list[mx.array]:
    if isinstance(state, mx.array):
        return [state]
    if isinstance(state, list | tuple):
        return [a for s in state for a in _leaves(s)]
    return []
