"""Exact speculative sampling (`acceptance.py`): tokens kept and drawn by a verify are
distributed as tokens sampled one by one from the target; a planted wrong rule is caught.

A synthetic target and draft on a 6-token vocabulary, 20,000 verifies judged at once from a
fixed seed (deterministic): Pearson's chi-square of the first emitted token against p_0, and
of the second (after the first draft was kept) against p_1.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_responses.service.engine import acceptance
from mlx_responses.service.engine.acceptance import Verdict, judge, outcome, settle
from mlx_responses.service.engine.seeded_sampler import RuleSampler

TRIALS = 20_000
# Chi-square's 99.9% quantile with 5 degrees of freedom (6 tokens): a right rule stays under
# it, and the seed is fixed, so the test is deterministic.
CRITICAL = 20.515

TARGET = mx.array(
    [
        [2.0, 1.0, 0.5, 0.0, -1.0, 0.3],  # p_0
        [0.1, 1.5, -0.5, 1.0, 0.0, -2.0],  # p_1 (after x_1)
        [1.0, 0.0, 0.0, 0.0, 0.0, 2.0],  # p_2 (after x_2)
    ]
)
DRAFT = mx.array(
    [
        [0.5, 2.0, 0.0, 0.0, 0.5, -1.0],  # q_0: x_1 is drawn from it
        [1.0, 1.0, 1.0, -1.0, 0.0, 0.0],  # q_1: x_2
    ]
)


def _chi_square(counts: np.ndarray, p: np.ndarray) -> float:
    expected = p * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def _distances(draft_model: bool) -> tuple[float, float]:
    """The chi-square statistics of the first and second emitted tokens against p_0, p_1."""
    mx.random.seed(7)
    scaled = mx.broadcast_to(TARGET, (TRIALS, *TARGET.shape))
    log_q = None
    if draft_model:
        log_q = mx.broadcast_to(DRAFT - mx.logsumexp(DRAFT, axis=-1, keepdims=True), (TRIALS, 2, 6))
        drafts = mx.random.categorical(log_q).astype(mx.uint32)
    else:  # n-gram drafts: fixed tokens, a point mass
        drafts = mx.broadcast_to(mx.array([1, 3], dtype=mx.uint32), (TRIALS, 2))
    verdict = judge(scaled, drafts, log_q, [None] * 3)
    mx.eval(verdict.drawn, verdict.keep, drafts)
    first, second = np.zeros(6), np.zeros(6)
    rows: list[list[int]] = drafts.tolist()  # type: ignore[assignment]
    drawn: list[list[int]] = verdict.drawn.tolist()  # type: ignore[assignment]
    keep = None if verdict.keep is None else verdict.keep.tolist()
    for t in range(TRIALS):
        kept, token = outcome(drawn[t], None if keep is None else keep[t], rows[t])
        emitted = [*rows[t][:kept], token]
        first[emitted[0]] += 1
        if kept >= 1:
            second[emitted[1]] += 1
    p = np.array(mx.softmax(TARGET, axis=-1))
    return _chi_square(first, p[0]), _chi_square(second, p[1])


@pytest.mark.parametrize("draft_model", [True, False], ids=["draft-model", "ngram"])
def test_kept_and_drawn_tokens_follow_the_target(draft_model: bool) -> None:
    first, second = _distances(draft_model)
    assert first < CRITICAL and second < CRITICAL, (first, second)


def _always_keep(p_x: mx.array, q_x: mx.array, u: mx.array) -> mx.array:
    return mx.ones(p_x.shape, dtype=mx.bool_)


def _inverted(p_x: mx.array, q_x: mx.array, u: mx.array) -> mx.array:
    return u * p_x < q_x  # min(1, q/p): the ratio upside down


@pytest.mark.parametrize(
    "plant",
    ["always keep", "inverted ratio", "residual is p", "ngram residual keeps x"],
)
def test_a_planted_wrong_rule_is_caught(plant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    draft_model = True
    if plant == "always keep":
        monkeypatch.setattr(acceptance, "keep_draft", _always_keep)
    elif plant == "inverted ratio":
        monkeypatch.setattr(acceptance, "keep_draft", _inverted)
    elif plant == "residual is p":
        monkeypatch.setattr(acceptance, "residual", lambda p, q: p)
    else:
        draft_model = False

        def planted(scaled: mx.array, keys: list[mx.array | None]) -> Verdict:
            # Keeps x with probability p(x), as it should, but a refused position draws from
            # all of p (x included) instead of p without x.
            drafts = mx.array([1, 3, 0], dtype=mx.uint32)
            p = mx.softmax(scaled, axis=-1)
            p_x = mx.take_along_axis(p, mx.broadcast_to(drafts, p.shape[:-1])[..., None], -1)
            keep = mx.random.uniform(shape=p_x.shape[:-1]) < p_x[..., 0]
            return Verdict(mx.random.categorical(scaled), keep[..., :2])

        monkeypatch.setattr(acceptance, "point_mass", planted)
    first, second = _distances(draft_model)
    assert max(first, second) > CRITICAL, (first, second)


def test_a_seeded_rule_draws_what_its_sampler_draws() -> None:
    """n-gram verdicts of a seeded row use its sampler's keys: the token drawn at each position
    is the token the sampler itself would draw there, and `advance` moves past them."""
    logprobs = mx.log(mx.softmax(mx.random.normal((4, 50), key=mx.random.key(1)), axis=-1))
    by_sampler = RuleSampler(0.9, 0.95, 20, seed=42)
    expected = [by_sampler(logprobs[j : j + 1]).item() for j in range(4)]
    rule = RuleSampler(0.9, 0.95, 20, seed=42)
    verdict = judge(rule.scaled(logprobs), expected[:3], None, rule.keys(4))
    assert settle(verdict, expected[:3]) == (3, expected[3])
    rule.advance(2)
    assert rule(logprobs[2:3]).item() == expected[2]
