"""Our own scheduler on mlx-lm's model call, fixed KV slots (`--engine slots`; `auto` on a CPU).

Each layer's keys and values live in one array of slots, `[slots, kv_heads, capacity, head_dim]`
(mlx-lm's own cache layout: what a step attends over is a slice of it, no transpose;
`store.py`). A sequence owns a slot from its prefill to its end, the lowest one free, so the
slots in use stay packed at the front as they fill; when finished sequences leave holes, the
ones above move down into them (`_compact`: one copy of each moved sequence's keys). The array
holds rows up to the highest slot in use (1, 2, 4, 8, then steps of 8, at most
`max_batch_size`) and positions up to the longest sequence held (steps of 256), each grown with
one copy when a sequence needs it and cut back with one copy when the sequences held need less
than half of either (`_shrink`); when the generator holds nothing (nothing live, nothing
waiting) it drops the arrays (a prompt-cache entry is a copy of its own). A sequence that joins
or leaves copies nothing of the others (no merge, filter or extract of the batch), short of a
growth, a move or a cut.

A step (`next`) admits waiting prompts to free slots, prefills, then decodes:
- prefill: one forward for the chunks of up to `prefill_batch_size` prompts (first come, first
  served), right-padded to the longest; row r writes its keys into its own slot from its own
  start (> 0 after a prompt-cache hit) and attends causally over its own slot. A chunk is at
  most `prefill_step_size` tokens, which the worker's fair prefill sets per step to its token
  budget over the prompts waiting (as with mlx-lm's BatchGenerator). Positions written by
  the padding are never attended (a sequence's length advances by its real chunk only, and later
  writes overwrite them). The last prompt token is not prefilled: as in mlx-lm, it is fed by
  the decode step, whose logits give the first token, so a prefill forward computes no logits.
- decode: one forward over the slots up to the highest one in use (free and prefilling slots
  ride along and are ignored), each row's new position written with one scatter, attention
  masked at each row's length (one slice and no mask when all rows are at one length, as a
  lone sequence is). The next forward is queued (`mx.async_eval`) before the host reads a
  step's tokens.

Sliding windows, per layer (mlx-lm's `RotatingKVCache(max_size=window, keep=0)`: every layer
of one window, as `sliding_window.apply_window` sets up, or sliding layers beside full ones, as
gemma3's and gpt-oss's `make_cache` declare; read at start, `fit.layer_windows`): a layer
attends as mlx-lm's rotating caches do, a query at position p seeing positions
max(0, p - window + 1)..p, in decode and in each prefill query. The slots store every position
as without a window; each layer's view attends over the span from the earliest window start of
its rows (a slice of the store, no mask for a lone or uniform decode) with masks that cut each
row at its own window's start: one plan per window in a forward, the layers that share a
window sharing it (`store.layer_views`). Prompt-cache entries hold, per layer, a KVCache or a
RotatingKVCache of the window's last positions (what mlx-lm's batch extracts), and restoring one
(ours, mlx-lm's, wrapped or not) writes those positions back where they were. NOTE: memory per
slot grows with the context as without a window (the store is not a ring; a ring buffer of
window + chunk positions per slot is a later step). Windows that keep their first tokens,
recurrent layers and other caches are refused (`fit.layer_windows`).

Speculative decoding (`--speculative ngram|draft`; the policy `engine/speculation.py`'s, the steps
`verify.py`'s): a verify step
replaces the decode step when drafts are worth it; each decoding row feeds its pending token
and its drafts, written into its own slot (the decoding rows only, gathered when not the
first slots), and a rejected draft is a length not advanced. A draft model's layers have
slots of their own after the target's; they lag on decode steps and catch up when needed
(`verify.py`).

Quantized KV (`--kv-bits`): `store.py` says how the slots hold it.

It implements `scheduler.Scheduler` (admit, step, drop, extract, take_alone, counts).
NOTE: logits processors (grammars, penalties) run row by row.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine import speculation as speculative
from mlx_responses.service.engine.scheduler import (
    Admission,
    Alone,
    PromptEnd,
    SpeculationCounts,
    StepResult,
    Token,
    chunk_to,
    sampled,
)
from mlx_responses.service.engine.slots import entries
from mlx_responses.service.engine.slots.fit import layer_windows
from mlx_responses.service.engine.slots.sequence import DecodeRows, SlotSequence, arrival
from mlx_responses.service.engine.slots.store import (
    ALL_HEADS,
    DecodePlan,
    DecodeView,
    PrefillPlan,
    PrefillView,
    Store,
    layer_views,
    window_start,
)
from mlx_responses.service.engine.slots.verify import Pending, SlotVerifier
from mlx_responses.service.engine.speculation import SpeculationPolicy
from mlx_responses.service.engine.vision.language import VisionLanguage
from mlx_responses.service.engine.vision.rows import chunk_inputs, step_inputs, vision_row


class SlotScheduler:
    """Continuous batching over fixed KV slots (a `scheduler.Scheduler`)."""

    rewinds_any_window = True  # a rejected draft is a length not advanced

    def __init__(
        self,
        model: Any,
        *,
        stop_tokens: Collection[int],
        completion_batch_size: int,
        prefill_batch_size: int,
        prefill_step_size: int,
        sampler: Any = None,
        speculation: SpeculationPolicy | None = None,
        kv_bits: int | None = None,
        kv_group: int | None = None,
    ) -> None:
        """`kv_bits` (4 or 8) with `kv_group` (the model's group size, `kv_group_size`): the
        slots hold quantized keys and values (plain caches only)."""
        self.model = model
        # A vision model's language side prefills image prompts from their embeddings.
        self.takes_embeddings = isinstance(model, VisionLanguage)
        self._spec = speculation
        self.speculates = speculation is not None
        # With a draft model, the stores of the target's layers come first, then the draft's.
        self._split = len(model.layers)
        if speculation is not None and speculation.drafted is not None:
            self._split = speculation.drafted.split
        self.stop = set(stop_tokens)
        self.slots: list[SlotSequence | None] = [None] * completion_batch_size
        self.prefill_batch_size = prefill_batch_size
        self.prefill_step_size = prefill_step_size
        self.sampler = sampler or (lambda lp: mx.argmax(lp, axis=-1))
        # Each layer's window (None: every position); a store per layer, in the same order.
        self.windows = layer_windows(model)
        quantized = None
        if kv_bits is not None:
            if kv_group is None or any(w is not None for w in self.windows):
                raise ValueError("quantized KV slots need a group size and plain caches")
            quantized = (kv_group, kv_bits)
        self._stores = [Store(completion_batch_size, quantized) for _ in model.layers]
        # The verify steps when speculating (verify.py): a collaborator on the same stores.
        self._verifier: SlotVerifier | None = None
        if speculation is not None:
            self._verifier = SlotVerifier(
                model,
                speculation,
                self._stores,
                self.windows,
                split=self._split,
                sample=self._sample,
                emit=self._emit,
                prompt_in=self._prompt_in,
            )
        self._queue: deque[SlotSequence] = deque()  # admitted, waiting for a slot
        self._prefilled = 0  # prompt tokens the current step prefilled
        self.moved_sequences = 0  # moved down to a lower slot (`_compact`)
        # A sequence left its slot since the last step: only then can holes open below the
        # highest slot in use, or the stores hold more than the sequences need.
        self._vacated = False
        # To feed to the next decode step: the last step's rows (by slot and uid) with their
        # sampled tokens and logprobs, and the rows whose prefill ended since (their last
        # prompt token: fed, not emitted).
        self._pending: Pending | None = None
        self._joined: list[tuple[int, int]] = []
        # Whether a prompt's entry is taken where its prefill ends (`PromptEnd`), for a prompt
        # cache whose entries cannot be trimmed (a sliding window).
        self.prompt_ends = False
        self._ends: list[PromptEnd] = []
        # Where the steps run (a sequence decoded alone runs there too).
        self.stream = mx.default_stream(mx.default_device())

    # --- the Scheduler protocol ------------------------------------------------------------
    def admit(self, admission: Admission) -> None:
        """A prompt in segments: a prefill chunk ends where each but the last ends, and, with
        `prompt_ends`, an entry is taken there, as before the prompt's last token and after
        it (the decode step that feeds it)."""
        vision = vision_row(admission)
        if vision is not None and not self.takes_embeddings:
            raise ValueError("these slots take token ids only")
        parts = admission.segments
        prompt = admission.prompt
        if not prompt:
            raise ValueError("empty prompt")
        cache = admission.cache
        before = list(admission.cached) if cache is not None else []
        ends = list(itertools.accumulate(len(part) for part in parts[:-1]))
        seq = SlotSequence(
            uid=admission.uid,
            pending=list(prompt[:-1]),
            last=prompt[-1],
            tokens=before,
            max_tokens=admission.max_tokens,
            sampler=admission.sampler,
            processors=list(admission.logits_processors),
            cache=cache,
            stops=tuple(len(before) + end for end in ends if 0 < end < len(prompt) - 1),
            vision=vision,
        )
        self._queue.append(seq)
        if self._spec is not None and admission.speculate:
            self._spec.admit(seq.uid, admission.sampler)

    def drop(self, uids: Sequence[int]) -> None:
        """Frees their slots (their pending tokens are dropped at the next step)."""
        gone = set(uids)
        self._queue = deque(s for s in self._queue if s.uid not in gone)
        for i, seq in enumerate(self.slots):
            if seq is not None and seq.uid in gone:
                self.slots[i] = None
                self._vacated = True
        if self._spec is not None:
            for uid in gone:
                self._spec.forget(uid)
        self._release_if_idle()

    def close(self) -> None:
        self.slots = [None] * len(self.slots)
        self._queue.clear()
        self._pending, self._joined = None, []
        self._release_if_idle()

    def _release_if_idle(self) -> None:
        """No sequence held nor waiting: the stores go, and with them the memory of the longest
        sequence held so far (a prompt-cache entry is a copy of its own)."""
        if self._queue or any(s is not None for s in self.slots):
            return
        self._pending, self._joined = None, []
        for store in self._stores:
            store.release()

    @property
    def nbytes(self) -> int:
        return sum(store.nbytes for store in self._stores)

    @property
    def waiting(self) -> int:
        prefilling = sum(1 for s in self.slots if s is not None and s.pending)
        return len(self._queue) + prefilling

    @property
    def decoding(self) -> int:
        return sum(1 for s in self.slots if s is not None and s.ready)

    @property
    def speculation(self) -> SpeculationCounts | None:
        spec = self._spec
        if spec is None:
            return None
        return SpeculationCounts(spec.drafted_tokens, spec.accepted_tokens, spec.verify_steps)

    def step(self) -> StepResult:
        self._ends = []
        self._prefilled = 0
        self._admit()
        if self._vacated:
            self._vacated = False
            self._compact()
            self._shrink()
        self._prefill()
        ends = self._ends
        responses = self._decode()
        self._release_if_idle()
        return StepResult(ends, responses, self._prefilled)

    def extract(self, uids: Sequence[int]) -> dict[int, tuple[list[Any], list[int]]]:
        """Copies of the held sequences' slots as prompt-cache entries (the sequences go on)."""
        wanted = set(uids)
        return {
            seq.uid: (self._extract(seq), list(seq.tokens))
            for seq in self.slots
            if seq is not None and seq.uid in wanted and seq.tokens
        }

    # --- steps -----------------------------------------------------------------------------
    def _admit(self) -> None:
        while self._queue and None in self.slots:
            seq = self._queue.popleft()
            seq.slot = self.slots.index(None)
            self.slots[seq.slot] = seq
            if seq.cache is not None:
                self._restore(seq)
            if not seq.pending:
                self._join(seq)

    def _compact(self) -> None:
        """Moves the sequences held in the highest slots down into the free slots below, so
        that the slots in use are 0..n-1 again: each move copies that sequence's keys once,
        where every later step would compute the free row again (a decode step runs over the
        slots up to the highest in use).

        A new sequence takes the lowest free slot, so the slots stay packed as they fill; they
        spread as sequences of different lengths finish. Measured (hidden-512 random model, 2
        CPU cores, 16 streams of 8-96 tokens): 30% less time than leaving the holes, on par
        with mlx-lm's batch, which filters finished rows out every step."""
        held = [i for i, seq in enumerate(self.slots) if seq is not None]
        if not held or held[-1] + 1 == len(held):
            return
        free = [i for i in range(len(held)) if self.slots[i] is None]
        moved: dict[int, int] = {}
        for old in reversed(held):
            if old < len(held):
                break
            new = free.pop(0)
            self._move(old, new)
            moved[old] = new
        if self._pending is not None:
            rows, tokens, logprobs = self._pending
            self._pending = ([(moved.get(i, i), uid) for i, uid in rows], tokens, logprobs)
        self._joined = [(moved.get(i, i), uid) for i, uid in self._joined]

    def _shrink(self) -> None:
        """The stores give back the rows and positions no sequence held needs any more (more
        than half of either): the memory of a past burst or a past long sequence goes back
        while others decode (and `prompt_cache_nbytes`, which the prompt cache's budget reads,
        with it)."""
        held = [seq for seq in self.slots if seq is not None]
        if not held:
            return
        # Every position a held sequence will write before it can grow again: its prompt.
        positions = max(len(s.tokens) + len(s.pending) + 1 for s in held)
        for store in self._stores:
            store.shrink(held[-1].slot + 1, positions)

    def _move(self, old: int, new: int) -> None:
        """The sequence in slot `old` to the free slot `new`, its keys copied (with a window,
        the positions still attended only)."""
        seq = self.slots[old]
        assert seq is not None and self.slots[new] is None
        n = len(seq.tokens)
        for store, window in zip(self._stores, self.windows, strict=True):
            lo = window_start(n - 1, window)  # the window of its last token
            if n > lo:
                span = (ALL_HEADS, slice(lo, n))
                keys, values = store.span((slice(old, old + 1), *span))
                store.write((slice(new, new + 1), *span), keys, values)
        self.slots[old], self.slots[new] = None, seq
        seq.slot = new
        self.moved_sequences += 1

    def _join(self, seq: SlotSequence) -> None:
        """Prefilled: the next decode step feeds its last prompt token."""
        seq.ready = True
        self._joined.append((seq.slot, seq.uid))

    def _restore(self, seq: SlotSequence) -> None:
        """Copies a prompt-cache entry into the sequence's slot (`entries.restore`)."""
        assert seq.cache is not None
        n = len(seq.tokens)
        if n:  # else an empty cache (a lone sequence handed over before its first chunk)
            entries.restore(self._stores, self.windows, seq.slot, n, seq.cache)
        seq.cache = None
        seq.drafted_to = n

    def _prefill(self) -> None:
        """One forward for the next chunk of each waiting prompt (up to `prefill_batch_size`)."""
        waiting = sorted((s for s in self.slots if s is not None and s.pending), key=arrival)
        waiting = waiting[: self.prefill_batch_size]
        if not waiting:
            return
        # `prefill_step_size` is each prompt's chunk, as in mlx-lm: the worker sets it to its
        # step budget over the prompts waiting (at most `prefill_batch_size`).
        step = max(1, self.prefill_step_size)
        chunks = [seq.pending[: chunk_to(seq.stops, len(seq.tokens), step)] for seq in waiting]
        width = max(len(chunk) for chunk in chunks)
        slots, starts = [s.slot for s in waiting], [len(s.tokens) for s in waiting]
        # Right-padded: what the padding writes past a row's chunk is never attended.
        inputs = mx.array([chunk + [0] * (width - len(chunk)) for chunk in chunks], mx.uint32)
        rows = [(s.vision, len(s.tokens), c) for s, c in zip(waiting, chunks, strict=True)]
        extra = chunk_inputs(self.model, rows, width)
        self._forward(
            inputs,
            self._views(PrefillView, lambda w: PrefillPlan(slots, starts, width, w)),
            extra=extra,
        )
        mx.async_eval([(s.keys, s.values) for s in self._stores])  # not the logits
        for seq, chunk in zip(waiting, chunks, strict=True):
            seq.pending = seq.pending[len(chunk) :]
            seq.tokens += chunk
            seq.drafted_to = len(seq.tokens)  # a prefill forward is the draft's too
            self._prefilled += len(chunk)
            if self.prompt_ends and (not seq.pending or len(seq.tokens) in seq.stops):
                self._ends.append(PromptEnd(seq.uid, self._extract(seq), list(seq.tokens)))
            if not seq.pending:
                self._join(seq)

    def _views(
        self,
        view: Callable[[Store, Any], Any],
        plan: Callable[[int | None], Any],
    ) -> list[Any]:
        """A forward's caches over every layer's store (`store.layer_views`)."""
        return layer_views(self._stores, self.windows, view, plan)

    def _prompt_in(self, seq: SlotSequence) -> None:
        """With `prompt_ends`, the entry of a sequence whose decode step just fed its last
        prompt token: its whole prompt is in, its first token sampled and not yet fed (a draft
        model's layers caught up, as in `_finish`)."""
        if not self.prompt_ends:
            return
        if self._verifier is not None and self._verifier.spec.drafted is not None:
            self._verifier.catch_up([seq])
        self._ends.append(PromptEnd(seq.uid, self._extract(seq), list(seq.tokens)))

    def _sample(self, rows: list[SlotSequence], logits: mx.array) -> tuple[mx.array, mx.array]:
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
        samplers = [s.sampler for s in rows]
        if all(s is samplers[0] for s in samplers):
            return sampled(samplers[0], logits)  # greedy: log probabilities left unevaluated
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        tokens = mx.concatenate([s(logprobs[i : i + 1]) for i, s in enumerate(samplers)], axis=0)
        return tokens, logprobs

    def _waiting(self) -> tuple[list[tuple[int, int]], mx.array, mx.array | None, int] | None:
        """(slot, uid) of the rows with a token to feed, the tokens, the logprobs of the first
        `sampled` rows (the sampled ones; the rest feed their last prompt token), `sampled`."""
        named: list[tuple[int, int]] = []
        tokens: list[mx.array] = []
        logprobs = None
        if self._pending is not None:
            rows, t, lp = self._pending
            keep = [i for i, row in enumerate(rows) if self._live(row)]
            if len(keep) == len(rows):
                named, tokens, logprobs = list(rows), [t], lp
            elif keep:
                picked = mx.array(keep)
                named, tokens, logprobs = [rows[i] for i in keep], [t[picked]], lp[picked]
        sampled = len(named)
        joined = [row for row in self._joined if self._live(row)]
        if joined:
            named += joined
            last = [self.slots[slot].last for slot, _ in joined]  # type: ignore[union-attr]
            tokens.append(mx.array(last, dtype=mx.uint32))
        self._pending, self._joined = None, []
        if not named:
            return None
        current = tokens[0] if len(tokens) == 1 else mx.concatenate(tokens)
        return named, current, logprobs, sampled

    def _live(self, row: tuple[int, int]) -> bool:
        """Whether the sequence `row` names still holds its slot (not finished nor removed)."""
        seq = self.slots[row[0]]
        return seq is not None and seq.ready and seq.uid == row[1]

    def _decode(self) -> list[Token]:
        waiting = self._waiting()
        if waiting is None:
            return []
        named, current, current_lp, sampled = waiting
        slots = [slot for slot, _ in named]
        live = [self.slots[i] for i in slots]
        assert all(seq is not None for seq in live)
        rows: list[SlotSequence] = live  # type: ignore[assignment]
        hi = max(slots) + 1
        if slots == list(range(hi)):
            inputs, index = current, None
        else:
            index = mx.array(slots)
            inputs = mx.zeros((hi,), dtype=current.dtype)
            inputs[index] = current
        lengths = [len(seq.tokens) if seq is not None else 0 for seq in self.slots[:hi]]
        verifier = self._verifier
        if verifier is not None and verifier.spec.drafted is not None:
            # A draft model lags at most MAX_LAG positions (bounds a catch-up forward).
            verifier.catch_up(
                [seq for seq in rows if len(seq.tokens) - seq.drafted_to >= speculative.MAX_LAG]
            )
        if verifier is not None:
            step = DecodeRows(named, rows, current, current_lp, sampled, inputs, lengths)
            drafts = verifier.drafts(step)
            if drafts is not None:
                responses, self._pending = verifier.verify(step, *drafts)
                return responses
        views = self._views(DecodeView, lambda w: DecodePlan(lengths, slots, w))
        # The draft model does not read a decode step's tokens: it catches up when it drafts.
        extra = step_inputs([seq.vision if seq else None for seq in self.slots[:hi]], lengths)
        logits = self._forward(inputs.astype(mx.uint32)[:, None], views, draft=False, extra=extra)
        logits = logits[:, -1, :]
        if index is not None:
            logits = logits[index]
        fed: list[int] = []
        if any(seq.processors for seq in rows):
            # Processors read each row's context, the token fed now included.
            fed = current.tolist()  # type: ignore[assignment]
            for seq, token in zip(rows, fed, strict=True):
                seq.tokens.append(token)
        tokens, logprobs = self._sample(rows, logits)
        # Not the log probabilities: evaluated where read (`scheduler.sampled`).
        mx.async_eval(tokens, [(s.keys, s.values) for s in self._stores])
        values: list[int] = fed or current.tolist()  # type: ignore[assignment]
        responses = []
        still = []
        for i, (seq, token) in enumerate(zip(rows, values, strict=True)):
            if not fed:
                seq.tokens.append(token)
            if i >= sampled:  # its last prompt token: nothing to emit
                still.append(i)
                self._prompt_in(seq)
                continue
            assert current_lp is not None
            response = self._emit(seq, token, current_lp[i])
            responses.append(response)
            if response.finish_reason is None:
                still.append(i)
        if still:
            if len(still) == len(rows):
                self._pending = (named, tokens, logprobs)
            else:
                keep = mx.array(still)
                self._pending = ([named[i] for i in still], tokens[keep], logprobs[keep])
        return responses

    def _forward(
        self,
        inputs: mx.array,
        views: list[Any],
        *,
        draft: bool = True,
        extra: dict[str, mx.array] | None = None,
    ) -> mx.array:
        """The model over `inputs` and `extra` (vision/rows.py): the target's logits; with
        `draft`, a draft model reads them too (the stores are what a step evaluates)."""
        spec = self._spec
        if spec is None or spec.drafted is None:
            out: mx.array = self.model(inputs, cache=views, **(extra or {}))
            return out
        if draft:
            spec.drafted.draft(inputs, cache=views[self._split :])
        out = spec.drafted.target(inputs, cache=views[: self._split])
        return out

    def _emit(self, seq: SlotSequence, token: int, logprobs: mx.array) -> Token:
        """A generated token of `seq` (its keys in the slot): the sequence ends on a stop
        token or its budget, leaving its slot."""
        seq.generated += 1
        finish = None
        if token in self.stop:
            finish = "stop"
        elif seq.generated >= seq.max_tokens:
            finish = "length"
        cache = all_tokens = None
        if finish is not None:
            cache, all_tokens = self._finish(seq)
        return Token(seq.uid, token, logprobs, finish, cache, all_tokens)

    def _finish(self, seq: SlotSequence) -> tuple[list[Any], list[int]]:
        """A finished sequence leaves its slot: its prompt-cache entry (a draft model's
        layers caught up: the entry holds both at one offset) and tokens."""
        if self._spec is not None:
            self._spec.forget(seq.uid)
            if self._verifier is not None and self._spec.drafted is not None:
                self._verifier.catch_up([seq])
        self.slots[seq.slot] = None
        self._vacated = True
        return self._extract(seq), list(seq.tokens)

    def take_alone(self) -> Alone | None:
        """The only sequence held, out of its slot, when it decodes unconstrained and nothing
        waits (the worker then decodes it alone); None otherwise."""
        held = [s for s in self.slots if s is not None]
        if len(held) != 1 or self._queue or self._joined or not self._pending:
            return None
        seq = held[0]
        rows, tokens, logprobs = self._pending
        if seq.processors or seq.pending or rows != [(seq.slot, seq.uid)]:
            return None
        alone = Alone(
            seq.uid,
            self._extract(seq),
            list(seq.tokens),
            (tokens, logprobs[0]),
            seq.sampler,
            seq.max_tokens - seq.generated,
        )
        self.slots[seq.slot] = None
        self._pending = None
        if self._spec is not None:
            self._spec.forget(seq.uid)
        self._release_if_idle()
        return alone

    def _extract(self, seq: SlotSequence) -> list[Any]:
        """The sequence's keys as a prompt-cache entry (`entries.extract`)."""
        return entries.extract(self._stores, self.windows, seq.slot, len(seq.tokens))
