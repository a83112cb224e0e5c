"""A model whose config declares a sliding window (Qwen's `use_sliding_window`) is served with it.

mlx-lm's qwen3 ignores the declaration and attends to every position; the reference here is
mlx-lm's own generation with a rotating KV cache of the window's size in every layer, which is
the attention Hugging Face's Qwen3 computes for such a config.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import RotatingKVCache
from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import collect, generate, greedy
from tests.support.random_model import build_random_model

WINDOW = 16
TOKENS = 40
TEXTS = (
    "The quick brown fox jumps over the lazy dog again and again and again",
    "hello there my friend, how are you today?",
)


@pytest.fixture(scope="module")
def windowed_model(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    return build_random_model(
        tmp_path_factory.mktemp("windowed") / "windowed",
        seed=5,
        tokenizer_from=model_path,
        sliding_window=WINDOW,
    )


def _reference(path: Path, text: str | list[int], *, window: int | None) -> tuple[int, ...]:
    """mlx-lm's greedy tokens with a rotating cache of `window` (None: a plain cache)."""
    model, tokenizer = load(str(path))  # mlx-lm's qwen3: no window of its own
    prompt = tokenizer.encode(text) if isinstance(text, str) else text
    cache = None if window is None else [RotatingKVCache(window) for _ in model.layers]
    steps = generate_step(mx.array(prompt), model, max_tokens=TOKENS, prompt_cache=cache)
    return tuple(t for t, _ in steps)


async def test_a_lone_sequence_attends_over_the_window(windowed_model: Path) -> None:
    expected = _reference(windowed_model, TEXTS[0], window=WINDOW)
    assert len(load_model(windowed_model).tokenizer.encode(TEXTS[0])) > WINDOW
    assert expected != _reference(windowed_model, TEXTS[0], window=None)  # the window matters
    (alone,), stats = await generate(windowed_model, greedy(TEXTS[:1], TOKENS))
    assert stats.solo_sequences == 1 and alone == expected


async def test_batched_sequences_attend_over_the_window(windowed_model: Path) -> None:
    """Two prompts of different lengths (left-padded) decode together, each as alone."""
    expected = [_reference(windowed_model, text, window=WINDOW) for text in TEXTS]
    together, stats = await generate(windowed_model, greedy(TEXTS, TOKENS), solo=False)
    assert stats.max_batch_seen == 2 and together == expected
    # A lone sequence handed to the batch when the second arrives keeps its window too.
    together, stats = await generate(windowed_model, greedy(TEXTS, TOKENS))
    assert together == expected


@pytest.mark.parametrize(
    ("worker", "warning"),
    [
        ({"speculative": "ngram"}, "--speculative ngram has no effect on windowed"),
        ({"kv_bits": 8}, "--kv-bits ignored"),
    ],
)
async def test_speculation_and_kv_bits_leave_the_window_as_it_is(
    windowed_model: Path, worker: dict[str, Any], warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither applies to rotating caches: the sequences decode plainly, window intact, and
    the startup log says so."""
    expected = [_reference(windowed_model, text, window=WINDOW) for text in TEXTS]
    with caplog.at_level(logging.WARNING):
        together, stats = await generate(windowed_model, greedy(TEXTS, TOKENS), **worker)
    assert together == expected and stats.verify_steps == 0
    assert warning in caplog.text


async def test_a_next_turn_reuses_the_windowed_prompt_cache(windowed_model: Path) -> None:
    """The next turn extends the last one (its prompt, its output, more words): its cache is
    reused, however far the window has rotated, and decodes as a fresh window would."""
    engine = EngineWorker(
        lambda: load_model(windowed_model), stream_window=0.0, max_prefill_tokens_per_step=8
    )
    loaded = await engine.start()
    try:
        first = loaded.tokenizer.encode(TEXTS[0])
        answer = await collect(engine.submit(first, greedy(TEXTS, TOKENS)[0][1]))
        second = [*first, *answer, *loaded.tokenizer.encode(" and then what?")]
        continued = await collect(engine.submit(second, greedy(TEXTS, TOKENS)[0][1]))
    finally:
        engine.stop()
    assert engine.stats.prompt_cache_hits == 1 and engine.stats.cached_tokens > WINDOW
    assert continued == _reference(windowed_model, second, window=WINDOW)


async def test_the_slots_engine_refuses_a_windowed_model(windowed_model: Path) -> None:
    engine = EngineWorker(lambda: load_model(windowed_model), engine="slots")
    with pytest.raises(ConfigError, match="--engine slots needs plain KV caches"):
        await engine.start()
