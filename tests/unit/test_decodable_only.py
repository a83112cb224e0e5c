"""A model head wider than its tokenizer (padded) never yields an id the tokenizer lacks."""

from __future__ import annotations

import mlx.core as mx
from mlx_responses.service.engine.vision.language import decodable_only


def test_padding_ids_are_never_sampled() -> None:
    logits = mx.array([[0.0, 1.0, 2.0, 50.0, 40.0]])  # ids 3 and 4 are padding
    masked = decodable_only(3)(mx.array([0]), logits)
    assert int(mx.argmax(masked, axis=-1).item()) == 2
    assert bool(mx.all(mx.isinf(masked[0, 3:])).item())


def test_a_head_no_wider_than_the_tokenizer_is_unchanged() -> None:
    logits = mx.array([[0.5, 0.1, 0.9]])
    assert mx.array_equal(decodable_only(3)(mx.array([0]), logits), logits)
