"""Per-sequence rotary positions of a vision-language model's language side (M-RoPE, Qwen-VL).

Qwen-VL's language model rotates each token by three position ids (time, height, width). A text
token has the same id thrice, one more than the token before; an image's tokens take their
grid coordinates, offset past the text before them, so that the text after an image resumes at
one past the image's largest id. A prompt's ids are computed once from its tokens and its
images' grids (`MRoPE.positions`: what mlx-vlm's `get_rope_index` computes, in numpy, at
no cost to the step: theirs syncs the device per image and walks the prompt in Python, ~1.4 ms
of the engine's thread per request on the tests' tiny model); past its images a token's ids are
its index plus the prompt's `delta` (the largest id + 1 - the prompt's length; 0 for text
alone), which is all a decode step needs (a `RowPositions`, `image_prompt.py`). A batch forward
takes one [3, rows, width] array: each row its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.image_prompt import TEXT, RowPositions


@dataclass(frozen=True)
class MRoPE:
    """A Qwen-VL model's rule for its prompts' positions: the image placeholder, the token that
    opens an image, and how many patches a side of the grid folds into one token."""

    image_token: int
    vision_start: int
    merge: int

    @classmethod
    def of(cls, config: Any) -> MRoPE:
        """From a Qwen-VL config (Qwen2-VL, Qwen2.5-VL, Qwen3-VL(-MoE): mlx-vlm's `ModelConfig`)."""
        return cls(
            int(config.image_token_id),
            int(config.vision_start_token_id),
            int(config.vision_config.spatial_merge_size),
        )

    def positions(self, tokens: Sequence[int], grids: np.ndarray | None) -> RowPositions:
        """`tokens`' positions, each image's ([t, h, w] patches, a row of `grids` in order)
        from its grid: text runs on one id per token; an image's tokens take (t, h / merge,
        w / merge) coordinates past the text before it; the text after it resumes one past
        its largest id. As `get_rope_index`: an image is a `vision_start` followed by the
        placeholder, its tokens the placeholders from the first at or after the text's end."""
        ids = np.asarray(tokens, dtype=np.int64)
        n = len(ids)
        table = np.empty((3, n), np.int32)
        opens = (ids[:-1] == self.vision_start) & (ids[1:] == self.image_token)
        count = int(opens.sum()) if grids is not None else 0
        spots = np.flatnonzero(ids == self.image_token)
        start = 0  # the first token not yet placed
        next_id = 0  # the id the next text token takes
        folded: list[list[int]] = []
        if count:
            folded = (np.asarray(grids, np.int64)[:count] // [1, self.merge, self.merge]).tolist()
        for t, h, w in folded:
            at = int(spots[np.searchsorted(spots, start)])
            text = at - start
            table[:, start:at] = next_id + np.arange(text)
            size = t * h * w
            table[:, at : at + size] = np.indices((t, h, w)).reshape(3, size) + next_id + text
            next_id += text + max(t, h, w)
            start = at + size
        table[:, start:] = next_id + np.arange(n - start)
        largest = int(table.max()) if n else -1
        return _cut(table, largest + 1 - n if count else 0)


def row_positions(position_ids: mx.array | None, delta: mx.array | int | None) -> RowPositions:
    """A prompt's `RowPositions` from mlx-vlm's `get_rope_index` ([3, 1, n], [1, 1]): the table
    cut where ids become index + delta for good (the rest is computed when needed)."""
    if position_ids is None:
        return TEXT
    table = np.array(position_ids, dtype=np.int32).reshape(3, -1)
    shift = int(np.array(delta).reshape(-1)[0]) if delta is not None else 0
    return _cut(table, shift)


def _cut(table: np.ndarray, shift: int) -> RowPositions:
    """[3, n] ids as `RowPositions`: the table up to its last id that is not index + `shift`."""
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
