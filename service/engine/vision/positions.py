"""Per-sequence rotary positions of a vision-language model's language side (M-RoPE, Qwen-VL).

Qwen-VL's language model rotates each token by three position ids (time, height, width). A text
token has the same id thrice, one more than the token before; an image's tokens take their
grid coordinates, offset past the text before them, so that the text after an image resumes at
one past the image's largest id. A prompt's ids are computed once from its tokens and its
images' grids (mlx-vlm's `get_rope_index`); past its images a token's ids are its index plus
the prompt's `delta` (the largest id + 1 - the prompt's length; 0 for text alone), which is
all a decode step needs. A batch forward takes one [3, rows, width] array: each row its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mlx.core as mx
import numpy as np


@dataclass(frozen=True)
class RowPositions:
    """One sequence's positions: the prompt's ids while they differ from index + delta
    (`table`, [3, n]: up to its last image token; None for text alone), `delta` past them."""

    table: np.ndarray | None = None
    delta: int = 0

    @property
    def plain(self) -> bool:
        """Each token at its index: what a text model's cache offset gives."""
        return self.table is None and self.delta == 0

    def span(self, start: int, length: int) -> np.ndarray:
        """[3, length]: the ids of tokens start..start+length-1."""
        out = np.empty((3, length), np.int32)
        held = 0 if self.table is None else max(0, min(length, self.table.shape[1] - start))
        if held:
            assert self.table is not None
            out[:, :held] = self.table[:, start : start + held]
        if held < length:
            out[:, held:] = np.arange(start + held, start + length, dtype=np.int32) + self.delta
        return out


TEXT = RowPositions()


def row_positions(position_ids: mx.array | None, delta: mx.array | int | None) -> RowPositions:
    """A prompt's `RowPositions` from mlx-vlm's `get_rope_index` ([3, 1, n], [1, 1]): the table
    cut where ids become index + delta for good (the rest is computed when needed)."""
    if position_ids is None:
        return TEXT
    table = np.array(position_ids, dtype=np.int32).reshape(3, -1)
    shift = int(np.array(delta).reshape(-1)[0]) if delta is not None else 0
    plain = np.arange(table.shape[1], dtype=np.int32) + shift
    differs = np.nonzero((table != plain[None, :]).any(axis=0))[0]
    if not len(differs):
        return RowPositions(None, shift)
    return RowPositions(table[:, : int(differs[-1]) + 1], shift)


def chunk_positions(rows: Sequence[RowPositions], starts: Sequence[int], width: int) -> mx.array:
    """[3, rows, width]: each row's ids from its start (a prefill chunk, right-padded: the
    padding's ids go on from the row's, never attended)."""
    spans = [row.span(start, width) for row, start in zip(rows, starts, strict=True)]
    return mx.array(np.stack(spans, axis=1))


def decode_positions(rows: Sequence[RowPositions], lengths: Sequence[int]) -> mx.array:
    """[3, rows, 1]: each row's token at its length (past its images: index + delta)."""
    return chunk_positions(rows, lengths, 1)
