"""A batched, quantized KV cache (mlx-lm's QuantizedKVCache layout) for BatchGenerator.

mlx-lm quantizes single-sequence caches only; this is the batch counterpart of its
BatchKVCache: left-padded rows of (packed, scales, biases) keys and values, with the same
merge / extend / filter / extract / trim / right-padding protocol the batch generator uses.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx.utils import tree_map, tree_reduce
from mlx_responses.service.engine.batch.mlx_lm_compat import (
    create_causal_mask,
    dynamic_roll,
)
from mlx_responses.service.engine.kv_quant import Quantized, SequenceQuantizedKVCache


def _zeros(shape: tuple[int, ...], dim: int, bits: int, group: int, dtype: Any) -> Quantized:
    return (
        mx.zeros((*shape, dim * bits // 32), dtype=mx.uint32),
        mx.zeros((*shape, dim // group), dtype=dtype),
        mx.zeros((*shape, dim // group), dtype=dtype),
    )


def _cat(a: Quantized, b: Quantized, axis: int) -> Quantized:
    return (
        mx.concatenate([a[0], b[0]], axis=axis),
        mx.concatenate([a[1], b[1]], axis=axis),
        mx.concatenate([a[2], b[2]], axis=axis),
    )


def _ints(x: mx.array) -> list[int]:
    values: list[int] = x.tolist()  # type: ignore[assignment]
    return values


def _dims(q: Quantized, bits: int) -> int:
    return q[0].shape[-1] * 32 // bits


class BatchQuantizedKVCache:
    """Left-padded batch of quantized KV rows; `bits` routes attention to quantized SDPA."""

    step = 256

    def __init__(self, left_padding: list[int], group_size: int, bits: int) -> None:
        self.keys: Quantized | None = None
        self.values: Quantized | None = None
        self.left_padding = mx.array(left_padding)
        self.offset = mx.array([-p for p in left_padding])
        self._idx = 0
        self._right_padding: mx.array | None = None
        self.group_size = group_size
        self.bits = bits

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[Quantized, Quantized]:
        batch, heads, steps, _ = keys.shape
        prev = self._idx
        if self.keys is None or self.values is None or prev + steps > self.keys[0].shape[2]:
            size = (self.step + steps - 1) // self.step * self.step
            shape = (batch, heads, size)
            new_k = _zeros(shape, keys.shape[-1], self.bits, self.group_size, keys.dtype)
            new_v = _zeros(shape, values.shape[-1], self.bits, self.group_size, keys.dtype)
            if self.keys is not None and self.values is not None:
                old_k, old_v = tree_map(lambda x: x[..., :prev, :], (self.keys, self.values))
                self.keys, self.values = _cat(old_k, new_k, 2), _cat(old_v, new_v, 2)
            else:
                self.keys, self.values = new_k, new_v
        assert self.keys is not None and self.values is not None
        self.offset = self.offset + steps
        self._idx += steps
        qk = mx.quantize(keys, group_size=self.group_size, bits=self.bits)
        qv = mx.quantize(values, group_size=self.group_size, bits=self.bits)
        for i in range(3):
            self.keys[i][..., prev : self._idx, :] = qk[i]
            self.values[i][..., prev : self._idx, :] = qv[i]
        return self.keys_and_values()

    def keys_and_values(self) -> tuple[Quantized, Quantized]:
        idx = self._idx
        return tree_map(lambda x: x[..., :idx, :], (self.keys, self.values))  # type: ignore[no-any-return]

    def prepare(
        self,
        *,
        left_padding: list[int] | None = None,
        lengths: list[int] | None = None,
        right_padding: list[int] | None = None,
    ) -> None:
        if left_padding is not None:
            if self.keys is not None:
                raise ValueError("left padding can only be added to an empty cache")
            pad = mx.array(left_padding)
            self.left_padding = self.left_padding + pad
            self.offset = self.offset - pad
        if right_padding is not None and max(right_padding) > 0:
            self._right_padding = mx.array(right_padding)

    def finalize(self) -> None:
        """Turns right padding (from a ragged prefill or rejected drafts) into left padding."""
        if self._right_padding is None:
            return
        shift = self._right_padding[:, None]
        self.keys, self.values = tree_map(
            lambda x: dynamic_roll(x, shift, axis=2), (self.keys, self.values)
        )
        self.offset = self.offset - self._right_padding
        self.left_padding = self.left_padding + self._right_padding
        self._right_padding = None

    @property
    def state(self) -> tuple[Any, ...]:
        return self.keys, self.values, self.offset, self.left_padding

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self._idx, n)
        self._idx -= n
        self.offset = self.offset - n
        return n

    def make_mask(self, N: int, return_array: bool = False, **kwargs: Any) -> mx.array:
        return create_causal_mask(N, offset=self._idx, left_padding=self.left_padding, **kwargs)

    def filter(self, batch_indices: Any) -> None:
        if self.keys is not None:
            self.keys, self.values = tree_map(lambda x: x[batch_indices], (self.keys, self.values))
        self.offset = self.offset[batch_indices]
        self.left_padding = self.left_padding[batch_indices]
        shift = min(_ints(self.left_padding)) if self.left_padding.size else 0
        if shift > 0:
            if self.keys is not None:
                self.keys, self.values = tree_map(
                    lambda x: x[..., shift:, :], (self.keys, self.values)
                )
            self._idx -= shift
            self.left_padding = self.left_padding - shift

    def extend(self, other: BatchQuantizedKVCache) -> None:
        if self.keys is None and other.keys is None:
            self.left_padding = mx.concatenate([self.left_padding, other.left_padding])
            self.offset = mx.concatenate([self.offset, other.offset])
            return
        template = self.keys if self.keys is not None else other.keys
        vtemplate = self.values if self.values is not None else other.values
        assert template is not None and vtemplate is not None
        idx = max(self._idx, other._idx)
        size = max(c.keys[0].shape[2] for c in (self, other) if c.keys is not None)

        def pad(c: BatchQuantizedKVCache) -> tuple[Any, Any, mx.array, mx.array]:
            rows = c.offset.shape[0]
            if c.keys is None or c.values is None:
                kdim, vdim = _dims(template, self.bits), _dims(vtemplate, self.bits)
                k = _zeros(
                    (rows, template[0].shape[1], 0),
                    kdim,
                    self.bits,
                    self.group_size,
                    template[1].dtype,
                )
                v = _zeros(
                    (rows, vtemplate[0].shape[1], 0),
                    vdim,
                    self.bits,
                    self.group_size,
                    vtemplate[1].dtype,
                )
            else:
                k, v = c.keys, c.values
            left = idx - c._idx
            right = size - k[0].shape[2] - left
            if right < 0:
                k, v = tree_map(lambda x: x[..., :right, :], (k, v))
                right = 0
            if left or right:
                widths = [(0, 0), (0, 0), (left, right), (0, 0)]
                k, v = tree_map(lambda x: mx.pad(x, widths), (k, v))
            return k, v, c.offset, c.left_padding + left

        (k1, v1, o1, p1), (k2, v2, o2, p2) = pad(self), pad(other)
        self.keys, self.values = _cat(k1, k2, 0), _cat(v1, v2, 0)
        self.offset = mx.concatenate([o1, o2])
        self.left_padding = mx.concatenate([p1, p2])
        self._idx = idx

    def extract(self, idx: int) -> SequenceQuantizedKVCache:
        cache = SequenceQuantizedKVCache(self.group_size, self.bits)
        start = _ints(self.left_padding)[idx]
        end = self._idx
        # Contiguous copies: the entry holds (and is accounted for) only its own tokens.
        cache.keys, cache.values = tree_map(
            lambda x: mx.contiguous(x[idx : idx + 1, :, start:end]), (self.keys, self.values)
        )
        cache.offset = end - start
        return cache

    @classmethod
    def merge(cls, caches: list[Any]) -> BatchQuantizedKVCache:
        first = caches[0]
        lengths = [int(c.offset) if c.keys is not None else 0 for c in caches]
        longest = max(lengths)
        padding = [longest - n for n in lengths]
        batch = cls(padding, first.group_size, first.bits)
        if longest == 0:
            return batch
        full = next(c for c in caches if c.keys is not None)
        heads = full.keys[0].shape[1]
        kdim, vdim = _dims(full.keys, first.bits), _dims(full.values, first.bits)
        dtype = full.keys[1].dtype
        keys = _zeros((len(caches), heads, longest), kdim, first.bits, first.group_size, dtype)
        values = _zeros((len(caches), heads, longest), vdim, first.bits, first.group_size, dtype)
        for i, (p, c) in enumerate(zip(padding, caches, strict=True)):
            if c.keys is None:
                continue
            for j in range(3):
                keys[j][i : i + 1, :, p:] = c.keys[j][..., : c.offset, :]
                values[j][i : i + 1, :, p:] = c.values[j][..., : c.offset, :]
        batch.keys, batch.values = keys, values
        batch.offset = batch.offset + longest
        batch._idx = longest
        return batch

    def size(self) -> int:
        return self._idx

    def empty(self) -> bool:
        return self.keys is None

    @property
    def nbytes(self) -> int:
        if self.keys is None:
            return 0
        return int(tree_reduce(lambda a, x: a + x.nbytes, (self.keys, self.values), 0))
