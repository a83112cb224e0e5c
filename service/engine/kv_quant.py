"""Quantized KV for one sequence (mlx-lm's QuantizedKVCache layout), shared by every scheduler.

`--kv-bits` keeps keys and values as `mx.quantize`'s (packed, scales, biases) along head_dim
groups: a sequence's cache (prompt-cache entries, the solo path, new sequences) is a
`SequenceQuantizedKVCache`; the fixed slots store the same triples per slot
(`slots/store.py`), the batch engine its left-padded batch of them
(`batch/quantized_cache.py`).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx import nn
from mlx.utils import tree_reduce
from mlx_responses.service.engine.mlx_lm_compat import QuantizedKVCache
from mlx_responses.service.engine.model import plain_caches

Quantized = tuple[mx.array, mx.array, mx.array]  # packed values, scales, biases


def kv_group_size(model: nn.Module) -> int | None:
    """The quantization group size the model's head dimension allows (None: none does)."""
    if not plain_caches(model):
        return None  # sliding-window or recurrent layers: their caches stay as they are
    args = getattr(model, "args", None)
    head_dim = getattr(args, "head_dim", None) or (
        getattr(args, "hidden_size", 0) // max(1, getattr(args, "num_attention_heads", 1))
    )
    for group in (64, 32):
        if head_dim and head_dim % group == 0:
            return group
    return None


class SequenceQuantizedKVCache(QuantizedKVCache):
    """One sequence's quantized cache (prompt-cache entries, new sequences); joins a batch."""

    def size(self) -> int:
        return int(self.offset)

    @property
    def nbytes(self) -> int:
        if self.keys is None:
            return 0
        return int(tree_reduce(lambda a, x: a + x.nbytes, (self.keys, self.values), 0))

    @classmethod
    def merge(cls, caches: list[Any]) -> Any:
        """The batch engine's quantized batch of these (mlx-lm's BatchGenerator merges a
        sequence's cache into its batch by the cache's own `merge`)."""
        # NOTE: imported here: a shared module does not import a scheduler's package at load.
        from mlx_responses.service.engine.batch.quantized_cache import BatchQuantizedKVCache

        return BatchQuantizedKVCache.merge(caches)


def new_sequence_cache(model: nn.Module, group_size: int, bits: int) -> list[Any]:
    """A fresh, empty quantized cache for each layer."""
    return [SequenceQuantizedKVCache(group_size, bits) for _ in range(len(model.layers))]
