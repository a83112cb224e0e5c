"""Prefill pieces: at most the step, and never a last piece of one token."""

from __future__ import annotations

import pytest
from mlx_responses.service.engine.batch.prefill_batch import piece_size


@pytest.mark.parametrize(
    ("width", "step", "piece"),
    [
        (69, 4, 3),  # 17 pieces of 4 and one of 1: pieces of 3 instead
        (68, 4, 4),
        (3, 4, 3),  # one piece
        (1, 4, 1),
        (1025, 512, 511),
        (13, 4, 13),  # pieces of 4, 3 and 2 all leave one token: the chunk whole
        (7, 1, 7),  # a step of 1 would be all one-token pieces: the chunk whole
    ],
)
def test_piece_size(width: int, step: int, piece: int) -> None:
    assert piece_size(width, step) == piece


@pytest.mark.parametrize("step", [1, 2, 3, 4, 7, 512])
def test_no_chunk_leaves_a_one_token_piece(step: int) -> None:
    for width in range(2, 3000):
        piece = piece_size(width, step)
        assert 2 <= piece <= max(step, 2) or piece == width
        assert width % piece != 1
