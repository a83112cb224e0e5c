"""One batch of token rows through an embedding model: sorted by length, cut into forwards of
bounded size, each right-padded with an attention mask, pooled by the model (mean, CLS or last
token: mlx-embeddings' `text_embeds`, unit length)."""

from __future__ import annotations

from collections.abc import Sequence

import mlx.core as mx
import numpy as np
from mlx import nn


def chunks(lengths: Sequence[int], max_rows: int, max_tokens: int) -> list[list[int]]:
    """The rows of each forward, as indices into `lengths`: shortest first (little padding),
    each forward at most `max_rows` rows and `max_tokens` padded tokens (one row at least)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # Sorted: this row is the longest of the chunk so far.
        if current and (len(current) >= max_rows or (len(current) + 1) * lengths[i] > max_tokens):
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def padded(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[mx.array, mx.array]:
    """Right-padded ids `[rows, longest]` and their attention mask (1: a token, 0: padding)."""
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int32)
    mask = np.zeros((len(rows), width), dtype=np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return mx.array(ids), mx.array(mask)


def forward(model: nn.Module, rows: Sequence[Sequence[int]], pad_id: int) -> np.ndarray:
    """One forward over `rows`: their unit vectors, float32, `[rows, dimensions]`."""
    ids, mask = padded(rows, pad_id)
    vectors = model(ids, attention_mask=mask).text_embeds.astype(mx.float32)
    mx.eval(vectors)
    return np.array(vectors, copy=True)


def activation_bytes(rows: int, longest: int, hidden: int, heads: int, layers_live: int = 2) -> int:
    """What one forward holds while it runs (an estimate for the memory budget): a few hidden
    states per token and, on a CPU, each head's float32 attention scores and their softmax."""
    tokens = rows * longest
    return tokens * (layers_live * 4 * hidden * 4) + int(rows * heads * longest * longest * 4 * 2.5)
