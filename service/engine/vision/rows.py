"""What a scheduler's forward over a vision model takes beyond token ids: per row, the input
embeddings of its chunk and its M-RoPE positions (Qwen3-VL: and the deepstack features of the
image tokens in its chunk, `deepstack.py`).

A sequence admitted with embeddings (an image prompt, `encoder.py`) holds them from the position
its prefill starts at (`VisionRow.start`: past a prompt-cache hit) and its `positions.RowPositions`;
a text sequence on the same model holds neither. A forward whose rows are all text at plain
positions takes nothing extra (the model looks its tokens up and positions them by its cache's
offsets); otherwise every row gets embeddings (a text row's looked up) and positions. A row
lets its embeddings (and deepstack features) go once its prompt is prefilled (`chunk_inputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mlx.core as mx
from mlx_responses.service.engine.image_prompt import Deepstack
from mlx_responses.service.engine.vision.deepstack import chunk_deepstack
from mlx_responses.service.engine.vision.positions import (
    TEXT,
    RowPositions,
    chunk_positions,
    decode_positions,
)

if TYPE_CHECKING:
    from mlx_responses.service.engine.scheduler import Admission


@dataclass
class VisionRow:
    """A sequence's embeddings (`[positions, hidden]`, the first at prompt position `start`),
    its positions and its deepstack features (from `start` too)."""

    embeddings: mx.array | None
    start: int
    positions: RowPositions = TEXT
    deepstack: Deepstack | None = None

    @property
    def plain(self) -> bool:
        return self.embeddings is None and self.positions.plain


def vision_row(admission: Admission) -> VisionRow | None:
    """A sequence's vision row from its admission (its embeddings from the prompt position
    past what its cache holds); None for a text sequence."""
    embeddings, positions = admission.embeddings, admission.positions
    if embeddings is None and (positions is None or positions.plain):
        return None
    return VisionRow(embeddings, len(admission.cached), positions or TEXT, admission.deepstack)


def _plain(row: VisionRow | None) -> bool:
    return row is None or row.plain


def chunk_inputs(
    model: Any, rows: Sequence[tuple[VisionRow | None, int, list[int]]], width: int
) -> dict[str, Any]:
    """A prefill forward's extra arguments for `rows` (each: its vision row, where its chunk
    starts, the chunk's tokens), right-padded to `width`; empty when all rows are plain."""
    if all(_plain(row) for row, _, _ in rows):
        return {}
    parts: list[mx.array] = []
    stacks: list[tuple[Deepstack | None, int, int]] = []
    for row, start, chunk in rows:
        at = start - row.start if row is not None else 0
        if row is not None and row.embeddings is not None and 0 <= at < row.embeddings.shape[0]:
            part = row.embeddings[at : at + len(chunk)]
            stacks.append((row.deepstack, at, len(chunk)))
            if at + len(chunk) >= row.embeddings.shape[0] - 1:
                # The prompt is in but for its last token, which decoding feeds as a token:
                # the embeddings' (and deepstack features') memory goes.
                row.embeddings = row.deepstack = None
        else:
            part = model.embed(mx.array(chunk, dtype=mx.uint32)[None])[0]
            stacks.append((None, 0, 0))
        if part.shape[0] < width:
            pad = mx.zeros((width - part.shape[0], part.shape[1]), part.dtype)
            part = mx.concatenate([part, pad])
        parts.append(part)
    positions = [row.positions if row is not None else TEXT for row, _, _ in rows]
    starts = [start for _, start, _ in rows]
    return {
        "embeds": mx.stack(parts),
        "positions": chunk_positions(positions, starts, width),
        **chunk_deepstack(stacks, width),
    }


def step_inputs(rows: Sequence[VisionRow | None], lengths: Sequence[int]) -> dict[str, mx.array]:
    """A decode forward's extra arguments: each row's position at its length (a free or
    prefilling row riding along: any); empty when all rows are plain."""
    if all(_plain(row) for row in rows):
        return {}
    positions = [row.positions if row is not None else TEXT for row in rows]
    return {"positions": decode_positions(positions, lengths)}
