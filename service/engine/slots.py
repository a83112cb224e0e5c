"""Experimental (`--engine slots`): our own scheduler on mlx-lm's model call, fixed KV slots.

Each layer's keys and values live in one array of `max_batch_size` slots, `[slots, capacity,
kv_heads, head_dim]`, grown for all slots together in steps of 256 positions. A sequence owns a
slot from its prefill to its end: a decode step writes every row's new position with one
scatter, a prefill chunk writes its own slot, and a sequence that joins or leaves copies nothing
of the others (no merge, filter or extract of the batch). A decode step runs over the slots up
to the highest one in use; free slots and prefilling ones ride along and are ignored.

Prefill is chunked under the step's token budget (`prefill_step_size`, set per step by the
worker's fair prefill) and runs after each decode step, one forward per prompt chunk on its
slot. The next forward is queued (`mx.async_eval`) before the host reads a step's tokens.

It speaks the subset of mlx-lm's BatchGenerator the worker uses (insert, next, remove, close,
the prefill queues and counters). NOTE: no speculative decoding and no quantized KV on it yet
(the worker refuses those flags with it); logits processors (grammars, penalties) run row by row.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.mlx_lm_compat import KVCache

STEP = 256


@dataclass
class SlotResponse:
    """One generated token (BatchGenerator's GenerationBatch.Response fields)."""

    uid: int
    token: int
    logprobs: mx.array
    finish_reason: str | None
    prompt_cache: list[Any] | None
    all_tokens: list[int] | None


@dataclass
class _Sequence:
    uid: int
    pending: list[int]  # prompt tokens not prefilled yet
    tokens: list[int]  # tokens whose keys are in the slot
    max_tokens: int
    sampler: Any
    processors: list[Any]
    cache: list[Any] | None  # a prompt-cache entry to start from (copied into the slot)
    slot: int = -1
    generated: int = 0
    ready: bool = False  # a sampled token waits to be fed back (and emitted)


@dataclass
class _Counters:
    prompt_tokens: int = 0


class _Store:
    """One layer's slots."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.keys: mx.array | None = None
        self.values: mx.array | None = None

    def ensure(self, like: mx.array, positions: int) -> None:
        """Room for `positions` in every slot; `like` is [.., kv_heads, .., head_dim] keys."""
        have = 0 if self.keys is None else self.keys.shape[1]
        if positions <= have:
            return
        grow = (positions - have + STEP - 1) // STEP * STEP
        shape = (self.slots, grow, like.shape[1], like.shape[-1])
        new_k, new_v = mx.zeros(shape, like.dtype), mx.zeros(shape, like.dtype)
        if self.keys is None or self.values is None:
            self.keys, self.values = new_k, new_v
        else:
            self.keys = mx.concatenate([self.keys, new_k], axis=1)
            self.values = mx.concatenate([self.values, new_v], axis=1)


class _DecodeView:
    """A decode step's cache for one layer: rows 0..hi-1, row i at position lengths[i]."""

    def __init__(self, store: _Store, lengths: list[int], offset: mx.array) -> None:
        self.store = store
        self.lengths = lengths
        self.offset = offset
        self.rows = mx.arange(len(lengths))

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        store = self.store
        longest = max(self.lengths) + 1
        store.ensure(keys, longest)
        assert store.keys is not None and store.values is not None
        store.keys[self.rows, self.offset] = keys[:, :, 0, :]
        store.values[self.rows, self.offset] = values[:, :, 0, :]
        hi = len(self.lengths)
        k = store.keys[:hi, :longest].transpose(0, 2, 1, 3)
        v = store.values[:hi, :longest].transpose(0, 2, 1, 3)
        return k, v

    def make_mask(self, n: int, **_: Any) -> mx.array:
        longest = max(self.lengths) + 1
        valid = mx.arange(longest)[None, :] <= self.offset[:, None]
        return valid[:, None, None, :]


class _PrefillView:
    """A prefill chunk's cache for one layer: slot `slot`, from position `start`."""

    def __init__(self, store: _Store, slot: int, start: int) -> None:
        self.store = store
        self.slot = slot
        self.offset = start

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        store, s, start = self.store, self.slot, self.offset
        end = start + keys.shape[2]
        store.ensure(keys, end)
        assert store.keys is not None and store.values is not None
        store.keys[s, start:end] = keys[0].transpose(1, 0, 2)
        store.values[s, start:end] = values[0].transpose(1, 0, 2)
        k = store.keys[s : s + 1, :end].transpose(0, 2, 1, 3)
        v = store.values[s : s + 1, :end].transpose(0, 2, 1, 3)
        return k, v

    def make_mask(self, n: int, **_: Any) -> str | None:
        return "causal" if n > 1 else None


class _Decoding:
    """`len()` = sequences decoding (what the worker's fair prefill reads)."""

    def __init__(self, owner: SlotGenerator) -> None:
        self._owner = owner

    def __len__(self) -> int:
        return sum(1 for s in self._owner.slots if s is not None and s.ready)


class _Prefilling:
    def __init__(self, owner: SlotGenerator) -> None:
        self._owner = owner

    def __len__(self) -> int:
        return sum(1 for s in self._owner.slots if s is not None and s.pending)


class SlotGenerator:
    """Continuous batching over fixed KV slots (BatchGenerator's interface, as the worker uses)."""

    def __init__(
        self,
        model: Any,
        *,
        stop_tokens: list[list[int]],
        completion_batch_size: int,
        prefill_batch_size: int,
        prefill_step_size: int,
        sampler: Any = None,
    ) -> None:
        self.model = model
        self.stop = {t for seq in stop_tokens for t in seq}
        self.slots: list[_Sequence | None] = [None] * completion_batch_size
        self.prefill_batch_size = prefill_batch_size
        self.prefill_step_size = prefill_step_size
        self.sampler = sampler or (lambda lp: mx.argmax(lp, axis=-1))
        self._stores = [_Store(completion_batch_size) for _ in model.layers]
        self._unprocessed_sequences: deque[_Sequence] = deque()
        self._generation_batch = _Decoding(self)
        self._prompt_batch = _Prefilling(self)
        self._counters = _Counters()
        self._uids = 0
        # Sampled and not yet fed back: the last decode step's rows (by slot), and the rows
        # whose prefill ended since (their first token).
        self._pending: tuple[list[tuple[int, int]], mx.array, mx.array] | None = None
        self._joined: list[tuple[tuple[int, int], mx.array, mx.array]] = []

    # --- the BatchGenerator subset ---------------------------------------------------------
    def insert(
        self,
        prompts: list[list[int]],
        *,
        max_tokens: list[int],
        caches: list[list[Any] | None] | None = None,
        all_tokens: list[list[int]] | None = None,
        samplers: list[Any] | None = None,
        logits_processors: list[list[Any]] | None = None,
    ) -> list[int]:
        uids = []
        for i, prompt in enumerate(prompts):
            if not prompt:
                raise ValueError("empty prompt")
            cache = caches[i] if caches else None
            before = list(all_tokens[i]) if all_tokens and cache is not None else []
            seq = _Sequence(
                uid=self._uids,
                pending=list(prompt),
                tokens=before,
                max_tokens=max_tokens[i],
                sampler=(samplers[i] if samplers else None) or self.sampler,
                processors=list(logits_processors[i]) if logits_processors else [],
                cache=cache,
            )
            self._uids += 1
            self._unprocessed_sequences.append(seq)
            uids.append(seq.uid)
        return uids

    def remove(self, uids: list[int]) -> None:
        """Frees their slots (their pending tokens are dropped at the next step)."""
        gone = set(uids)
        self._unprocessed_sequences = deque(
            s for s in self._unprocessed_sequences if s.uid not in gone
        )
        for i, seq in enumerate(self.slots):
            if seq is not None and seq.uid in gone:
                self.slots[i] = None

    def close(self) -> None:
        self.slots = [None] * len(self.slots)
        self._unprocessed_sequences.clear()
        self._pending, self._joined = None, []

    @property
    def prompt_cache_nbytes(self) -> int:
        return sum(int(a.nbytes) for s in self._stores for a in (s.keys, s.values) if a is not None)

    def next(self) -> tuple[list[Any], list[SlotResponse]]:
        responses = self._decode()
        self._admit()
        self._prefill()
        return [], responses

    # --- steps -----------------------------------------------------------------------------
    def _admit(self) -> None:
        while self._unprocessed_sequences and None in self.slots:
            seq = self._unprocessed_sequences.popleft()
            seq.slot = self.slots.index(None)
            self.slots[seq.slot] = seq
            if seq.cache is not None:
                self._restore(seq)

    def _restore(self, seq: _Sequence) -> None:
        """Copies a prompt-cache entry into the sequence's slot."""
        assert seq.cache is not None
        n = len(seq.tokens)
        for store, layer in zip(self._stores, seq.cache, strict=True):
            keys, values = layer.keys, layer.values  # [1, kv_heads, >= n positions, head_dim]
            store.ensure(keys, n)
            assert store.keys is not None and store.values is not None
            store.keys[seq.slot, :n] = keys[0, :, :n].transpose(1, 0, 2)
            store.values[seq.slot, :n] = values[0, :, :n].transpose(1, 0, 2)
        seq.cache = None

    def _prefill(self) -> None:
        waiting = [s for s in self.slots if s is not None and s.pending]
        if not waiting:
            return
        share = max(1, self.prefill_step_size // min(len(waiting), self.prefill_batch_size))
        for seq in waiting[: self.prefill_batch_size]:
            # The last prompt token is fed with the final chunk: its logits give the first token.
            chunk, seq.pending = seq.pending[:share], seq.pending[share:]
            start = len(seq.tokens)
            views = [_PrefillView(store, seq.slot, start) for store in self._stores]
            logits = self.model(mx.array([chunk], dtype=mx.uint32), cache=views)
            seq.tokens += chunk
            self._counters.prompt_tokens += len(chunk)
            if seq.pending:
                mx.async_eval([(s.keys, s.values) for s in self._stores])
                continue
            token, logprobs = self._sample([seq], logits[:, -1, :])
            seq.ready = True
            self._joined.append(((seq.slot, seq.uid), token, logprobs))
            mx.async_eval(token, logprobs)

    def _sample(self, rows: list[_Sequence], logits: mx.array) -> tuple[mx.array, mx.array]:
        if any(s.processors for s in rows):
            processed = []
            for i, seq in enumerate(rows):
                row = logits[i : i + 1]
                if seq.processors:
                    context = mx.array(seq.tokens, dtype=mx.uint32)
                    for processor in seq.processors:
                        row = processor(context, row)
                processed.append(row)
            logits = mx.concatenate(processed, axis=0)
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        samplers = [s.sampler for s in rows]
        if all(s is samplers[0] for s in samplers):
            tokens = samplers[0](logprobs)
        else:
            tokens = mx.concatenate(
                [s(logprobs[i : i + 1]) for i, s in enumerate(samplers)], axis=0
            )
        return tokens, logprobs

    def _waiting(self) -> tuple[list[tuple[int, int]], mx.array, mx.array] | None:
        """(slot, uid) of the rows with a token to feed, the tokens, their logprobs rows."""
        slots: list[tuple[int, int]] = []
        tokens: list[mx.array] = []
        logprobs: list[mx.array] = []
        if self._pending is not None:
            rows, t, lp = self._pending
            keep = [i for i, row in enumerate(rows) if self._live(row)]
            if len(keep) == len(rows):
                slots, tokens, logprobs = list(rows), [t], [lp]
            elif keep:
                picked = mx.array(keep)
                slots, tokens, logprobs = [rows[i] for i in keep], [t[picked]], [lp[picked]]
        for row, t, lp in self._joined:
            if self._live(row):
                slots.append(row)
                tokens.append(t)
                logprobs.append(lp)
        self._pending, self._joined = None, []
        if not slots:
            return None
        if len(tokens) == 1:
            return slots, tokens[0], logprobs[0]
        return slots, mx.concatenate(tokens), mx.concatenate(logprobs)

    def _live(self, row: tuple[int, int]) -> bool:
        """Whether the sequence `row` names still holds its slot (not finished nor removed)."""
        seq = self.slots[row[0]]
        return seq is not None and seq.ready and seq.uid == row[1]

    def _decode(self) -> list[SlotResponse]:
        waiting = self._waiting()
        if waiting is None:
            return []
        named, current, current_lp = waiting
        slots = [slot for slot, _ in named]
        rows = [self.slots[i] for i in slots]
        hi = max(slots) + 1
        if slots == list(range(hi)):
            inputs, index = current, None
        else:
            index = mx.array(slots)
            inputs = mx.zeros((hi,), dtype=current.dtype)
            inputs[index] = current
        lengths = [len(seq.tokens) if seq is not None else 0 for seq in self.slots[:hi]]
        offset = mx.array(lengths, dtype=mx.int32)
        views = [_DecodeView(store, lengths, offset) for store in self._stores]
        logits = self.model(inputs.astype(mx.uint32)[:, None], cache=views)[:, -1, :]
        if index is not None:
            logits = logits[index]
        live = [seq for seq in rows if seq is not None]
        fed: list[int] = []
        if any(seq.processors for seq in live):
            # Processors read each row's context, the token fed now included.
            fed = current.tolist()  # type: ignore[assignment]
            for seq, token in zip(live, fed, strict=True):
                seq.tokens.append(token)
        tokens, logprobs = self._sample(live, logits)
        mx.async_eval(tokens, logprobs, [(s.keys, s.values) for s in self._stores])
        values: list[int] = fed or current.tolist()  # type: ignore[assignment]
        responses = []
        still = []
        for i, (seq, token) in enumerate(zip(live, values, strict=True)):
            if not fed:
                seq.tokens.append(token)
            seq.generated += 1
            finish = None
            if token in self.stop:
                finish = "stop"
            elif seq.generated >= seq.max_tokens:
                finish = "length"
            cache = all_tokens = None
            if finish is not None:
                cache, all_tokens = self._extract(seq), list(seq.tokens)
                self.slots[seq.slot] = None
            else:
                still.append(i)
            responses.append(SlotResponse(seq.uid, token, current_lp[i], finish, cache, all_tokens))
        if still:
            if len(still) == len(live):
                self._pending = (named, tokens, logprobs)
            else:
                keep = mx.array(still)
                self._pending = ([named[i] for i in still], tokens[keep], logprobs[keep])
        return responses

    def _extract(self, seq: _Sequence) -> list[Any]:
        """The sequence's keys as a prompt-cache entry (contiguous copies of its slot)."""
        n = len(seq.tokens)
        entry = []
        for store in self._stores:
            assert store.keys is not None and store.values is not None
            cache = KVCache()
            keys = mx.contiguous(store.keys[seq.slot : seq.slot + 1, :n].transpose(0, 2, 1, 3))
            values = mx.contiguous(store.values[seq.slot : seq.slot + 1, :n].transpose(0, 2, 1, 3))
            cache.keys, cache.values, cache.offset = keys, values, n
            entry.append(cache)
        return entry
