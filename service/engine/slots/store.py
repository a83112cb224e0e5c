"""The fixed KV slots' storage, and the cache views a forward of the slots attends through.

A `Store` holds one layer's keys and values for every slot, `[slots, kv_heads, capacity,
head_dim]` (plain, or with `--kv-bits` mlx-lm's quantized parts in the same layout). A plan says
what one forward writes and attends over (`DecodePlan`: one new position per row; `PrefillPlan`:
a chunk per row from its own start, also a speculative verify's width); a view is the cache
object mlx-lm's model calls for one layer (`update_and_fetch`, `make_mask`, `offset`, and
`bits`/`group_size` over a quantized store). The scheduler is `scheduler.py`.

Quantized KV (`--kv-bits`, `kv_bits` and the model's `kv_group`): the stores hold what mlx-lm's
QuantizedKVCache holds, `mx.quantize`'s (packed, scales, biases) in the same slot layout, and
the views quantize what a forward writes (each position alone, along head_dim groups: a chunk
quantized at once is the same bytes as position by position) and return the span quantized;
having `bits` and `group_size`, they send the model's attention down mlx-lm's quantized path
(`quantized_scaled_dot_product_attention`). Masks are as without. Prompt-cache entries are
SequenceQuantizedKVCaches (the batch engine's quantized sequences, interchangeable), restored
as they are; a plain entry is quantized as it is restored. Plain caches only (as the batch:
a windowed model's KV stays plain). A lone sequence leaves its slot for the solo path with
its entry quantized, and comes back with it (`take_alone`, `_restore`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.kv_quant import Quantized
from mlx_responses.service.engine.mlx_lm_compat import QuantizedKVCache, RotatingKVCache

STEP = 256  # positions a store grows by
SLOT_STEP = 8  # rows (slots) a store grows by, past 8 (doubling up to it: 1, 2, 4, 8)
# One side (keys or values) of a store or of what attention reads: plain, or with --kv-bits
# mlx-lm's quantized (packed, scales, biases).
Held = mx.array | Quantized


class Store:
    """One layer's slots: `[slots, kv_heads, capacity, head_dim]` keys and values.

    Rows up to the highest slot in use (1, 2, 4, 8, then steps of `SLOT_STEP`; at most `limit`)
    and positions up to the longest sequence held (in steps of `STEP`): a dimension that grows
    is copied once (concatenate); `release` drops both (the generator idle).

    With `quantized` (group size, bits) each side is held as mlx-lm's QuantizedKVCache holds it:
    `mx.quantize`'s (packed, scales, biases), each `[slots, kv_heads, capacity, ..]`. A position's
    keys are quantized alone (groups along head_dim), so writing a chunk at once or position by
    position stores the same bytes."""

    def __init__(self, limit: int, quantized: tuple[int, int] | None = None) -> None:
        self.limit = limit  # max_batch_size: the most rows a store holds
        self.quantized = quantized
        self.keys: Held | None = None
        self.values: Held | None = None

    def encode(self, x: mx.array) -> Held:
        """What the store holds for `x` ([..., head_dim]): `x`, or its quantized parts."""
        if self.quantized is None:
            return x
        group, bits = self.quantized
        packed, scales, biases = mx.quantize(x, group_size=group, bits=bits)
        return packed, scales, biases

    def ensure(self, keys: Held, values: Held, rows: int, positions: int) -> None:
        """Room for slots 0..rows-1 and `positions` in each, for keys and values like these
        ([.., kv_heads, .., head_dim], or their quantized parts; their widths may differ:
        multi-head latent attention's values are narrower than its keys)."""
        if self.keys is None or self.values is None:
            heads = parts_of(keys)[0].shape[1]
            shape = (self._rows(rows), heads, _grown(positions, STEP))
            self.keys, self.values = self._zeros(keys, shape), self._zeros(values, shape)
            return
        have_rows, _, have_positions = parts_of(self.keys)[0].shape[:3]
        if rows > have_rows:
            more = self._rows(rows) - have_rows
            self.keys, self.values = _widened(self.keys, 0, more), _widened(self.values, 0, more)
        if positions > have_positions:
            more = _grown(positions - have_positions, STEP)
            self.keys, self.values = _widened(self.keys, 2, more), _widened(self.values, 2, more)

    def _zeros(self, like: Held, shape: tuple[int, int, int]) -> Held:
        """An empty side of `shape` (rows, heads, positions) for keys like `like`."""
        if isinstance(like, mx.array):
            dim, dtype = like.shape[-1], like.dtype
        else:  # quantized: the scales have the keys' dtype
            assert self.quantized is not None
            dim, dtype = like[0].shape[-1] * 32 // self.quantized[1], like[1].dtype
        if self.quantized is None:
            return mx.zeros((*shape, dim), dtype)
        group, bits = self.quantized
        return (
            mx.zeros((*shape, dim * bits // 32), mx.uint32),
            mx.zeros((*shape, dim // group), dtype),
            mx.zeros((*shape, dim // group), dtype),
        )

    def put(self, index: tuple[Any, ...], keys: mx.array, values: mx.array) -> None:
        """Writes keys and values (as `store.keys[index]` selects them, head_dim last)."""
        self.write(index, self.encode(keys), self.encode(values))

    def write(self, index: tuple[Any, ...], keys: Held, values: Held) -> None:
        """`put` for keys and values already held as the store holds them."""
        assert self.keys is not None and self.values is not None
        for side, new in ((self.keys, keys), (self.values, values)):
            for part, value in zip(parts_of(side), parts_of(new), strict=True):
                part[index] = value

    def span(self, index: tuple[Any, ...]) -> tuple[Held, Held]:
        """The keys and values at `index` (what attention reads)."""
        assert self.keys is not None and self.values is not None
        return (
            held_of([p[index] for p in parts_of(self.keys)]),
            held_of([p[index] for p in parts_of(self.values)]),
        )

    @property
    def nbytes(self) -> int:
        sides = [s for s in (self.keys, self.values) if s is not None]
        return sum(int(p.nbytes) for side in sides for p in parts_of(side))

    def shrink(self, rows: int, positions: int) -> None:
        """Gives back what the slots in use (0..rows-1) and their sequences (up to
        `positions`) no longer need, when that is more than half of either dimension: one
        copy of what is kept (the margin keeps a store from shrinking and growing back at each
        step around a boundary)."""
        if self.keys is None or self.values is None:
            return
        have_rows, _, have_positions = parts_of(self.keys)[0].shape[:3]
        keep_rows, keep_positions = self._rows(rows), _grown(positions, STEP)
        if 2 * keep_rows >= have_rows and 2 * keep_positions >= have_positions:
            return
        keep_rows, keep_positions = min(keep_rows, have_rows), min(keep_positions, have_positions)
        cut = (slice(0, keep_rows), ALL_HEADS, slice(0, keep_positions))
        self.keys, self.values = (
            held_of([mx.contiguous(part[cut]) for part in parts_of(side)])
            for side in (self.keys, self.values)
        )

    def _rows(self, rows: int) -> int:
        """The rows a store grows to, to hold `rows` (few copies, few spare rows)."""
        grown = 1 << (rows - 1).bit_length() if rows <= SLOT_STEP else _grown(rows, SLOT_STEP)
        return max(rows, min(self.limit, grown))

    def release(self) -> None:
        self.keys = self.values = None


def parts_of(held: Held) -> tuple[mx.array, ...]:
    """A side's arrays: itself, or its (packed, scales, biases)."""
    return (held,) if isinstance(held, mx.array) else held


def held_of(parts: list[mx.array]) -> Held:
    """`parts_of` undone."""
    return parts[0] if len(parts) == 1 else (parts[0], parts[1], parts[2])


def _widened(held: Held, axis: int, more: int) -> Held:
    """`held` with `more` zero rows (axis 0) or positions (axis 2): one copy."""
    grown = []
    for part in parts_of(held):
        shape = list(part.shape)
        shape[axis] = more
        grown.append(mx.concatenate([part, mx.zeros(shape, part.dtype)], axis=axis))
    return held_of(grown)


def _grown(n: int, step: int) -> int:
    """`n` rounded up to a multiple of `step`."""
    return (n + step - 1) // step * step


def window_start(position: int, window: int | None) -> int:
    """The first position a query at `position` attends to."""
    return 0 if window is None else max(0, position - window + 1)


def _attends(keys: mx.array, queries: mx.array, window: int | None) -> mx.array:
    """[..., queries, keys]: whether each query position sees each key position (causal, and
    within the window)."""
    k, q = keys[None, :], queries[..., None]
    seen = k <= q
    return seen if window is None else seen & (k > q - window)


class DecodePlan:
    """One decode forward: rows 0..hi-1, row i writes its new position lengths[i]; the rows
    in `live` decode (the others ride along: free or prefilling slots, their output unread).

    Attention spans positions lo..end-1 of each slot: lo is the earliest window start of a
    live row (0 without a window)."""

    def __init__(self, lengths: list[int], live: list[int], window: int | None) -> None:
        self.rows = len(lengths)
        self.end = max(lengths) + 1  # the positions every row's attention spans
        self.lo = 0 if window is None else min(window_start(lengths[i], window) for i in live)
        # All rows at one length (a lone sequence, or a batch that started together): one
        # slice written, no mask (its window is the span lo..end-1).
        self.uniform = min(lengths) == self.end - 1
        self.offset: mx.array | int = self.end - 1  # each row's position (RoPE)
        self.timeline = self.end - 1  # the largest offset (`_View._offset`)
        self.mask: mx.array | None = None
        self.index = mx.arange(self.rows)
        if not self.uniform:
            offset = mx.array(lengths, dtype=mx.int32)
            self.offset = offset
            mask = _attends(mx.arange(self.lo, self.end, dtype=mx.int32), offset, window)
            if self.lo > 0:
                # A riding row before the span sees it all (no empty row: no NaN).
                mask = mask | (offset < self.lo)[:, None]
            self.mask = mask[:, None, None, :]


ALL_HEADS = slice(None)  # every kv head


class _View:
    """The cache object mlx-lm's model calls for one layer in one forward: the store it
    writes, the plan saying where, each row's offset (RoPE) and the plan's mask; over a
    quantized store, mlx-lm's QuantizedKVCache's `group_size` and `bits` (the model's
    attention then reads the (packed, scales, biases) `update_and_fetch` returns: mlx-lm's
    `scaled_dot_product_attention` checks for `bits`)."""

    def __init__(self, store: Store, plan: DecodePlan | PrefillPlan) -> None:
        self.store = store
        self._span = (plan.lo, plan.end)  # the key positions attention spans
        self.offset = plan.offset
        # The rows' largest offset, as a Python int: mlx-vlm's language models read it
        # (`cache_position_offset`) where they would otherwise take `offset.max().item()`, a
        # sync that waits for the step before to finish (the host then builds this step's
        # graph after that step's compute, not during it).
        self._offset = plan.timeline
        self._mask = plan.mask
        if store.quantized is not None:
            self.group_size, self.bits = store.quantized

    def make_mask(self, n: int, return_array: bool = False, **_: Any) -> mx.array | str | None:
        """The plan's mask; "causal" as an array where the model asks for one (gemma2's
        attention adds it to its scores itself)."""
        if return_array and isinstance(self._mask, str):
            lo, end = self._span
            queries = mx.arange(end - n, end, dtype=mx.int32)
            return _attends(mx.arange(lo, end, dtype=mx.int32), queries, None)
        return self._mask


class DecodeView(_View):
    """A decode forward's cache for one layer (see `DecodePlan`)."""

    def __init__(self, store: Store, plan: DecodePlan) -> None:
        super().__init__(store, plan)
        self.plan = plan

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[Held, Held]:
        store, plan = self.store, self.plan
        store.ensure(keys, values, plan.rows, plan.end)
        if plan.uniform:
            store.put((slice(0, plan.rows), ALL_HEADS, slice(plan.end - 1, plan.end)), keys, values)
        else:
            store.put((plan.index, ALL_HEADS, plan.offset), keys[:, :, 0, :], values[:, :, 0, :])
        return store.span((slice(0, plan.rows), ALL_HEADS, slice(plan.lo, plan.end)))


class PrefillPlan:
    """One prefill forward: row r writes slot slots[r] from starts[r], `width` positions.

    Attention spans positions lo..end-1 of each slot: lo is the earliest window start of a
    row's first query (0 without a window)."""

    def __init__(
        self, slots: list[int], starts: list[int], width: int, window: int | None = None
    ) -> None:
        self.slots, self.starts, self.width = slots, starts, width
        rows = len(slots)
        self.end = max(starts) + width  # the positions every row's attention spans
        self.lo = 0 if window is None else window_start(min(starts), window)
        # The rows' slots are first..first+rows-1 (-1: they are not consecutive).
        self.first = slots[0] if slots == list(range(slots[0], slots[0] + rows)) else -1
        # Consecutive slots from one start: the chunk is one slice of the store.
        self.uniform = self.first >= 0 and len(set(starts)) == 1
        self.index = mx.array(slots)
        self.offset: mx.array | int = starts[0]  # each row's start (RoPE)
        self.timeline = max(starts)  # the largest offset (`_View._offset`)
        self.mask: mx.array | str | None = "causal" if width > 1 else None
        self.positions: mx.array | None = None  # [rows, width]: where each row's chunk goes
        if rows == 1:
            # "causal" (or None) spans lo..end-1: right while the last query's window
            # starts at lo at the latest.
            if window_start(self.end - 1, window) > self.lo:
                queries = mx.arange(starts[0], self.end, dtype=mx.int32)
                keys = mx.arange(self.lo, self.end, dtype=mx.int32)
                self.mask = _attends(keys, queries, window)
            return
        offset = mx.array(starts, dtype=mx.int32)
        self.offset = offset
        self.positions = offset[:, None] + mx.arange(width, dtype=mx.int32)[None, :]
        # Row r's query i sees its own slot's keys up to its own position starts[r] + i
        # (and from its window's start).
        keys = mx.arange(self.lo, self.end, dtype=mx.int32)
        self.mask = _attends(keys, self.positions, window)[:, None]


class PrefillView(_View):
    """A prefill forward's cache for one layer (see `PrefillPlan`)."""

    def __init__(self, store: Store, plan: PrefillPlan) -> None:
        super().__init__(store, plan)
        self.plan = plan

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[Held, Held]:
        store, plan = self.store, self.plan
        store.ensure(keys, values, max(plan.slots) + 1, plan.end)
        rows = len(plan.slots)
        if plan.uniform:
            first, start = plan.first, plan.starts[0]
            chunk = (slice(first, first + rows), ALL_HEADS, slice(start, start + plan.width))
            store.put(chunk, keys, values)
        else:
            # [rows, width] (slot, position) pairs; the values as [rows, width, heads, dim].
            pairs = (plan.index[:, None], ALL_HEADS, plan.positions)
            store.put(pairs, keys.transpose(0, 2, 1, 3), values.transpose(0, 2, 1, 3))
        span = slice(plan.lo, plan.end)
        if plan.first >= 0:
            return store.span((slice(plan.first, plan.first + rows), ALL_HEADS, span))
        return store.span((plan.index, ALL_HEADS, span))


def in_order(layer: Any) -> tuple[Held, Held]:
    """A prompt-cache layer's keys and values of its last positions, oldest first.

    A RotatingKVCache (keep=0) holds its last positions in a ring once it has wrapped: the
    oldest at its write index. A QuantizedKVCache holds (packed, scales, biases)."""
    if isinstance(layer, RotatingKVCache):
        keys, values, offset, keep, _, idx = layer.state
        assert keep == 0
        if idx == keys.shape[2]:
            return keys, values
        if idx < offset:  # wrapped
            return (
                mx.concatenate([keys[:, :, idx:], keys[:, :, :idx]], axis=2),
                mx.concatenate([values[:, :, idx:], values[:, :, :idx]], axis=2),
            )
        return keys[:, :, :idx], values[:, :, :idx]
    n = layer.offset
    if isinstance(layer, QuantizedKVCache):
        sides: tuple[Any, Any] = (layer.keys, layer.values)  # each (packed, scales, biases)
        keys, values = (held_of([p[:, :, :n] for p in side]) for side in sides)
        return keys, values
    return layer.keys[:, :, :n], layer.values[:, :, :n]


def layer_views(
    stores: list[Store],
    windows: list[int | None],
    view: Callable[[Store, Any], Any],
    plan: Callable[[int | None], Any],
    *,
    start: int = 0,
    end: int | None = None,
) -> list[Any]:
    """A forward's caches over the stores `start:end` (each layer's, with its window): each
    store's view of the plan for its layer's window (one plan per window: layers that share
    one share it)."""
    chosen = windows[start:end]
    plans = {w: plan(w) for w in dict.fromkeys(chosen)}
    return [view(s, plans[w]) for s, w in zip(stores[start:end], chosen, strict=True)]
