"""Prompt-cache entries in and out of a slot: a sequence's keys copied from an entry into its
slot (`restore`), and out of its slot as an entry (`extract`), layer by layer over the stores."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.kv_quant import SequenceQuantizedKVCache
from mlx_responses.service.engine.mlx_lm_compat import KVCache, RotatingKVCache
from mlx_responses.service.engine.slots.store import (
    ALL_HEADS,
    Store,
    held_of,
    in_order,
    parts_of,
    window_start,
)


def restore(
    stores: list[Store], windows: list[int | None], slot: int, n: int, entry: list[Any]
) -> None:
    """Copies a prompt-cache entry of `n` positions into `slot`, each key at its position
    (a rotating cache's: the last positions only, the window and more; the slot's
    positions before them are never attended). Quantized slots take quantized entries
    as they are, and quantize plain ones."""
    for store, window, layer in zip(stores, windows, entry, strict=True):
        # Each query attends to `window` positions, its own included.
        need = n if window is None else min(n, window - 1)
        keys, values = in_order(layer)  # [1, kv_heads, positions n-held..n-1, head_dim]
        if isinstance(keys, mx.array) and isinstance(values, mx.array):
            keys, values = store.encode(keys), store.encode(values)
        else:
            assert store.quantized == (layer.group_size, layer.bits), "not this quantization"
        held = parts_of(keys)[0].shape[2]
        assert layer.offset == n and held >= need, (layer.offset, n, held)
        store.ensure(keys, values, slot + 1, n)
        store.write((slice(slot, slot + 1), ALL_HEADS, slice(n - held, n)), keys, values)


def extract(stores: list[Store], windows: list[int | None], slot: int, n: int) -> list[Any]:
    """The first `n` positions of `slot` as a prompt-cache entry (contiguous copies): a
    KVCache, with a window a RotatingKVCache of the window's last positions (what mlx-lm's
    batch extracts), quantized a SequenceQuantizedKVCache (what the batch's quantized
    sequences are)."""
    entry: list[Any] = []
    for store, window in zip(stores, windows, strict=True):
        lo = window_start(n - 1, window)  # the window of its last token
        held = store.span((slice(slot, slot + 1), ALL_HEADS, slice(lo, n)))
        keys, values = (held_of([mx.contiguous(p) for p in parts_of(side)]) for side in held)
        if store.quantized is not None:
            cache: Any = SequenceQuantizedKVCache(*store.quantized)
            cache.keys, cache.values, cache.offset = keys, values, n
        elif window is None:
            cache = KVCache()
            cache.keys, cache.values, cache.offset = keys, values, n
        else:
            cache = RotatingKVCache(max_size=window, keep=0)
            cache.state = (keys, values, n, 0, window, n - lo)
        entry.append(cache)
    # Copied before the next step writes the store (which then stays a buffer of its own).
    mx.async_eval([(c.keys, c.values) for c in entry])
    return entry
