"""Samplers with their own random key: a request's `seed` decides its tokens, batch or not."""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
from mlx_responses.service.engine.mlx_lm_compat import (
    apply_top_k,
    apply_top_p,
    greedy_sampler,
    make_sampler,
)

Sampler = Callable[[mx.array], mx.array]


def shared_sampler(temperature: float, top_p: float, top_k: int) -> Sampler:
    """mlx-lm's sampler on the global random state (requests without a seed share one)."""
    return make_sampler(temp=temperature, top_p=top_p if top_p < 1 else 0.0, top_k=top_k)


def seeded_sampler(temperature: float, top_p: float, top_k: int, seed: int) -> Sampler:
    """A sampler that draws from its own key, split once per step.

    NOTE: one sampler per request, so a seeded request samples its row on its own (mlx-lm
    batches rows that share a sampler object); unseeded rows still share theirs.
    """
    if temperature == 0:
        return greedy_sampler
    state = [mx.random.key(seed % 2**64)]

    def sample(logprobs: mx.array) -> mx.array:
        if 0 < top_p < 1:
            logprobs = apply_top_p(logprobs, top_p)
        if top_k > 0:
            logprobs = apply_top_k(logprobs, top_k)
        state[0], step = mx.random.split(state[0])
        return mx.random.categorical(logprobs * (1.0 / temperature), key=step)

    return sample


class Samplers:
    """One sampler object per setting (a seeded request gets its own): a scheduler samples
    the rows that share one in one call."""

    def __init__(self) -> None:
        self._shared: dict[tuple[float, float, int], Sampler] = {}

    def __call__(self, temperature: float, top_p: float, top_k: int, seed: int | None) -> Sampler:
        if seed is not None:
            return seeded_sampler(temperature, top_p, top_k, seed)
        key = (temperature, top_p, top_k)
        if key not in self._shared:
            self._shared[key] = shared_sampler(temperature, top_p, top_k)
        return self._shared[key]

    def clear(self) -> None:
        self._shared.clear()
