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
    """Right-padded ids `[rows, longest]` and their attention mask (1: a token, 0: padding).

    The mask is int32: mlx-embeddings' Qwen3 indexes the last token with its sums."""
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int32)
    mask = np.zeros((len(rows), width), dtype=np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return mx.array(ids), mx.array(mask)


def pooled(hidden: mx.array, mask: mx.array, pooling: str) -> mx.array:
    """Each row's vector out of its tokens' last hidden states (right-padded rows)."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "lasttoken":
        last = mask.sum(axis=1).astype(mx.int32) - 1
        return mx.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0]
    weights = mask[..., None].astype(hidden.dtype)
    return (hidden * weights).sum(axis=1) / mx.maximum(weights.sum(axis=1), 1)


def forward(
    model: nn.Module, rows: Sequence[Sequence[int]], pad_id: int, pooling: str | None = None
) -> np.ndarray:
    """One forward over `rows`: their unit vectors, float32, `[rows, dimensions]`. `pooling`:
    sentence-transformers' mode over the last hidden states; None: the model's own."""
    ids, mask = padded(rows, pad_id)
    out = model(ids, attention_mask=mask)
    if pooling is None:
        vectors = out.text_embeds.astype(mx.float32)
    else:
        vectors = pooled(out.last_hidden_state.astype(mx.float32), mask, pooling)
        vectors = vectors / mx.maximum(mx.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
    mx.eval(vectors)
    return np.array(vectors, copy=True)


def activation_bytes(rows: int, longest: int, hidden: int, heads: int, layers_live: int = 2) -> int:
    """What one forward holds while it runs (an estimate for the memory budget): a few hidden
    states per token and, on a CPU, each head's float32 attention scores and their softmax."""
    tokens = rows * longest
    return tokens * (layers_live * 4 * hidden * 4) + int(rows * heads * longest * longest * 4 * 2.5)
