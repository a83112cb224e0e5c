"""presence_penalty / frequency_penalty as logits processors: what they subtract, and when."""

from __future__ import annotations

import mlx.core as mx
from mlx_responses.service.engine.penalties import penalty_processors


def _apply(presence: float, frequency: float, tokens: list[int]) -> list[float]:
    logits = mx.zeros((1, 4))
    for processor in penalty_processors(presence, frequency):
        logits = processor(mx.array(tokens), logits)
    return [float(v) for v in logits[0].tolist()]


def test_no_penalty_adds_no_processor() -> None:
    assert penalty_processors(0.0, 0.0) == []


def test_presence_subtracts_once_per_seen_token() -> None:
    assert _apply(1.5, 0.0, [1, 1, 2]) == [0.0, -1.5, -1.5, 0.0]


def test_frequency_subtracts_per_occurrence() -> None:
    assert _apply(0.0, 0.5, [1, 1, 2]) == [0.0, -1.0, -0.5, 0.0]


def test_negative_penalties_encourage_repeats() -> None:
    assert _apply(-1.0, -1.0, [3]) == [0.0, 0.0, 0.0, 2.0]
