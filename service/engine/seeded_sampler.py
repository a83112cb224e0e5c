"""Samplers with their own random key: a request's `seed` decides its tokens, batch or not.

A sampled request's sampler is a `RuleSampler`: besides drawing a token it says what it draws
from (`scaled`: the filtered log probabilities over the temperature, whose softmax is the
distribution) and which key each of its next draws will use (`keys`, `advance`), so that a
speculative verify (`acceptance.py`) decides drafts against exactly this distribution and, for a
seeded request, with the keys it would have used without drafting.
"""

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


class RuleSampler:
    """A sampler for `temperature` > 0 with `top_p` and `top_k`: from its own key, split once
    per token, when `seed` is given, else from MLX's global random state (mlx-lm's sampler,
    which requests without a seed share).

    NOTE: one per seeded request, so a seeded request samples its row on its own (mlx-lm
    batches rows that share a sampler object); unseeded rows still share theirs.
    """

    def __init__(self, temperature: float, top_p: float, top_k: int, seed: int | None) -> None:
        assert temperature > 0
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        self.seeded = seed is not None
        # The chain of states: _states[0] is the current one; each split gives the next state
        # and one draw's key (_steps[i]: the key of the i-th draw from now).
        self._states = [mx.random.key(seed % 2**64)] if seed is not None else []
        self._steps: list[mx.array] = []
        self._shared = (
            None if seed is not None else make_sampler(temp=temperature, top_p=top_p, top_k=top_k)
        )

    def scaled(self, logprobs: mx.array) -> mx.array:
        """`logprobs` filtered (top-p, then top-k, as mlx-lm's sampler) and over the
        temperature: the logits the token is drawn from (a categorical over them)."""
        if 0 < self.top_p < 1:
            logprobs = apply_top_p(logprobs, self.top_p)
        if self.top_k > 0:
            logprobs = apply_top_k(logprobs, self.top_k)
        return logprobs * (1.0 / self.temperature)

    def keys(self, n: int) -> list[mx.array | None]:
        """The keys of the next `n` draws, not used up (None each: the global random state)."""
        if not self.seeded:
            return [None] * n
        while len(self._steps) < n:
            state, step = mx.random.split(self._states[-1])
            self._states.append(state)
            self._steps.append(step)
        return list(self._steps[:n])

    def advance(self, n: int) -> None:
        """Uses up the next `n` draws' keys (tokens drawn elsewhere with `keys`)."""
        if self.seeded:
            self.keys(n)
            self._states, self._steps = self._states[n:], self._steps[n:]

    def __call__(self, logprobs: mx.array) -> mx.array:
        if self._shared is not None:
            return self._shared(logprobs)
        (key,) = self.keys(1)
        self.advance(1)
        return mx.random.categorical(self.scaled(logprobs), key=key)


def shared_sampler(temperature: float, top_p: float, top_k: int) -> Sampler:
    """mlx-lm's sampler on the global random state (requests without a seed share one)."""
    if temperature == 0:
        return greedy_sampler
    return RuleSampler(temperature, top_p, top_k, None)


def seeded_sampler(temperature: float, top_p: float, top_k: int, seed: int) -> Sampler:
    """A sampler that draws from its own key, split once per step."""
    if temperature == 0:
        return greedy_sampler
    return RuleSampler(temperature, top_p, top_k, seed)


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
