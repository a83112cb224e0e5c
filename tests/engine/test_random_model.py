"""The random test model never ends a turn by itself: the cancel and batching tests rely on it."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_sampler


def test_end_tokens_lose_to_every_other_token_at_every_position(random_model: Path) -> None:
    model, tokenizer = load(str(random_model))
    ends = sorted(tokenizer.eos_token_ids)
    vocab = model.args.vocab_size
    # Every token at least once as input, end tokens included, in a few shuffled orders.
    mx.random.seed(0)
    inputs = mx.stack([mx.random.permutation(vocab) for _ in range(4)])
    logits = model(inputs).astype(mx.float32)
    others = mx.ones((vocab,), dtype=mx.bool_)
    others[mx.array(ends)] = False
    lowest_other = mx.min(mx.where(others, logits, mx.inf), axis=-1)
    highest_end = mx.max(logits[..., mx.array(ends)], axis=-1)
    # A gap of 30 means an end token is drawn at temperature 1 less than once in 1e13 steps.
    assert mx.min(lowest_other - highest_end).item() > 30


def test_sampling_at_temperature_one_runs_to_the_limit(random_model: Path) -> None:
    model, tokenizer = load(str(random_model))
    prompt = mx.array(tokenizer.encode("Count forever"))
    sampler = make_sampler(temp=1.0)
    tokens = [t for t, _ in generate_step(prompt, model, max_tokens=3000, sampler=sampler)]
    assert len(tokens) == 3000
    assert not set(tokens) & set(tokenizer.eos_token_ids)
