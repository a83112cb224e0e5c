"""Speculative decoding on the slots: drafts (n-gram or a draft model) verified in one forward.

The policy (which rows draft, how far) is `speculation.py`'s; this is the mechanics on the
slot stores: each decoding row feeds its pending token and its drafts into its own slot, and a
rejected draft is a length not advanced. A draft model's layers have stores of their own after
the target's; they lag on decode steps and catch up when needed (`SlotVerifier.catch_up`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.acceptance import (
    Verdict,
    next_drafts,
    sampled_rule,
    settle,
    target_logprobs,
    verdict,
)
from mlx_responses.service.engine.draft_model import DraftedModel
from mlx_responses.service.engine.scheduler import Token
from mlx_responses.service.engine.seeded_sampler import RuleSampler
from mlx_responses.service.engine.slots.sequence import DecodeRows, SlotSequence
from mlx_responses.service.engine.slots.store import (
    DecodePlan,
    DecodeView,
    PrefillPlan,
    PrefillView,
    Store,
    layer_views,
)
from mlx_responses.service.engine.speculation import Candidate, SpeculationPolicy

# The rows a step leaves to the next (slot, uid), their sampled tokens and their logprobs.
Pending = tuple[list[tuple[int, int]], mx.array, mx.array]


class SlotVerifier:
    """The slot scheduler's verify steps: drafts for its decoding rows and one forward that
    checks them, on the slot stores it shares with the scheduler (a collaborator of
    `SlotScheduler`, which calls back for what a decode step does there too: sampling a row,
    emitting a token, a prompt that is all in)."""

    def __init__(
        self,
        model: Any,
        spec: SpeculationPolicy,
        stores: list[Store],
        windows: list[int | None],
        *,
        split: int,
        sample: Callable[[list[SlotSequence], mx.array], tuple[mx.array, mx.array]],
        emit: Callable[[SlotSequence, int, mx.array], Token],
        prompt_in: Callable[[SlotSequence], None],
    ) -> None:
        """`stores` and `windows`: each layer's store and window (the target's, then a draft
        model's from `split` on)."""
        self.model = model
        self.spec = spec
        self._stores = stores
        self._windows = windows
        self._split = split
        self._sample = sample
        self._emit = emit
        self._prompt_in = prompt_in

    def _views(
        self,
        view: Callable[[Store, Any], Any],
        plan: Callable[[int | None], Any],
        start: int = 0,
        end: int | None = None,
    ) -> list[Any]:
        return layer_views(self._stores, self._windows, view, plan, start=start, end=end)

    def catch_up(self, rows: list[SlotSequence]) -> None:
        """The draft model reads what it missed of these rows, in one forward (each row from
        its own position, right-padded: what the padding writes is past the row's length)."""
        spec = self.spec
        assert spec is not None and spec.drafted is not None
        behind = [seq for seq in rows if seq.drafted_to < len(seq.tokens)]
        if not behind:
            return
        missed = [seq.tokens[seq.drafted_to :] for seq in behind]
        width = max(len(m) for m in missed)
        slots, starts = [s.slot for s in behind], [s.drafted_to for s in behind]
        inputs = mx.array([m + [0] * (width - len(m)) for m in missed], dtype=mx.uint32)
        views = self._views(
            PrefillView, lambda w: PrefillPlan(slots, starts, width, w), start=self._split
        )
        spec.drafted.draft(inputs, cache=views)
        for seq in behind:
            seq.drafted_to = len(seq.tokens)

    def drafts(self, step: DecodeRows) -> tuple[mx.array, list[int], dict[int, mx.array]] | None:
        """This step's verify input, a row per decoding sequence (its pending token, then its
        drafts, padded), and each one's count of real drafts; None: a plain decode step.

        Only rows that sampled their pending token draft (not one feeding its last prompt
        token), when eligible (no grammar: `Admission.speculate`) and with tokens left to
        generate."""
        spec = self.spec
        assert spec is not None
        candidates, which = [], []
        for i in range(step.sampled):
            seq = step.rows[i]
            room = min(spec.num_draft, seq.max_tokens - seq.generated - 1)
            if seq.uid in spec.eligible and room > 0:
                candidates.append(Candidate(seq.uid, room, seq.tokens))
                which.append(i)
        if not candidates:
            return None
        if spec.drafted is None:
            return self._ngram_drafts(step, candidates, which)
        return self._model_drafts(step, candidates, which)

    def _ngram_drafts(
        self, step: DecodeRows, candidates: list[Candidate], which: list[int]
    ) -> tuple[mx.array, list[int], dict[int, mx.array]] | None:
        """`_drafts` from n-gram lookup (`which`: the candidates' rows)."""
        spec = self.spec
        assert spec is not None
        values: list[int] = []

        def pending() -> list[int]:
            values.extend(step.current.tolist())  # type: ignore[arg-type]
            return [values[i] for i in which]

        found = spec.ngram(candidates, pending, len(step.rows))
        if found is None:
            spec.rest(candidates)
            return None
        width = max(len(d) for d in found)
        drafts: list[list[int]] = [[] for _ in step.rows]
        for i, draft in zip(which, found, strict=True):
            drafts[i] = draft
        table = [
            [token, *draft] + [0] * (width - len(draft))
            for token, draft in zip(values, drafts, strict=True)
        ]
        return mx.array(table, dtype=mx.uint32), [len(d) for d in drafts], {}

    def _model_drafts(
        self, step: DecodeRows, candidates: list[Candidate], which: list[int]
    ) -> tuple[mx.array, list[int], dict[int, mx.array]] | None:
        """`_drafts` from the draft model (greedy; a sampled row draws from its rule over the
        draft's logits), one forward per draft position over the
        slots up to the highest in use, as a decode step (free and prefilling slots ride
        along); nothing waited for."""
        spec = self.spec
        assert spec is not None and spec.drafted is not None
        width = spec.draft_width(candidates, len(step.rows))
        if not width:
            spec.rest(candidates)
            return None
        self.catch_up([step.rows[i] for i in which])

        def views(j: int) -> list[Any]:
            lengths = [n + j for n in step.lengths]
            return self._views(
                DecodeView, lambda w: DecodePlan(lengths, step.slots, w), start=self._split
            )

        # The sampled rows draw their drafts (rows of the draft forward: slots).
        rules = {
            step.rows[i].slot: rule
            for i in which
            if (rule := sampled_rule(step.rows[i].sampler)) is not None
        }
        table, by_slot = draft_columns(
            spec.drafted, step.inputs.astype(mx.uint32), width, views, rules
        )
        if step.slots != list(range(len(step.lengths))):
            table = table[mx.array(step.slots)]
        rooms = dict(zip(which, (c.room for c in candidates), strict=True))
        counts = [min(width, rooms.get(i, 0)) for i in range(len(step.rows))]
        log_q = {
            i: by_slot[seq.slot][: counts[i]]
            for i, seq in enumerate(step.rows)
            if seq.slot in by_slot
        }
        return table, counts, log_q

    def _judge(
        self, seq: SlotSequence, logits: mx.array, table: list[int], n: int, log_q: mx.array | None
    ) -> tuple[mx.array, Verdict]:
        """A sampled or processed drafting row's log probabilities at its n + 1 positions and
        its verdict (`acceptance.py`): its processors read its tokens and the columns fed."""
        lp = target_logprobs(
            logits[: n + 1],
            seq.processors,
            lambda j: mx.array(seq.tokens + table[: j + 1], dtype=mx.uint32),
        )
        return lp, verdict(seq.sampler, lp, table[1 : 1 + n], log_q)

    def verify(
        self,
        step: DecodeRows,
        inputs: mx.array,
        counts: list[int],
        log_q: dict[int, mx.array] | None = None,
    ) -> tuple[list[Token], Pending | None]:
        """One forward over each row's pending token and drafts (`inputs`, as `_drafts` gives);
        a greedy drafting row keeps its drafts up to the first greedy decoding would not have
        made, a sampled (or processed) one those `acceptance.py` keeps,
        the others sample their pending token's successor as a decode step would. Returns
        the step's tokens and what the next step feeds (the scheduler's pending rows)."""
        spec = self.spec
        assert spec is not None
        log_q = log_q or {}
        rows, sampled, slots = step.rows, step.sampled, step.slots
        width = inputs.shape[1]
        # Only the decoding rows: a free or prefilling slot would widen the forward for nothing
        # (their slots are gathered when not the first ones in a row).
        starts = [len(seq.tokens) for seq in rows]
        views = self._views(
            PrefillView, lambda w: PrefillPlan(slots, starts, width, w), end=self._split
        )
        target = self.model if spec.drafted is None else spec.drafted.target
        logits = target(inputs, cache=views)
        spec.verify_steps += 1
        drafting = [i < sampled and seq.uid in spec.eligible for i, seq in enumerate(rows)]
        table: list[list[int]] = inputs.tolist()  # type: ignore[assignment]
        others = [i for i, d in enumerate(drafting) if not d]
        other_row = {i: k for k, i in enumerate(others)}  # row -> its place in `others`
        for i in others:  # processors read the context with the token fed now
            rows[i].tokens.append(table[i][0])
            if i >= sampled:  # its last prompt token: the whole prompt is in
                self._prompt_in(rows[i])
        other_tokens = other_lp = None
        if others:
            picked = mx.array(others)
            other_tokens, other_lp = self._sample([rows[i] for i in others], logits[picked, 0])
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        greedy = mx.argmax(logprobs, axis=-1)
        # Sampled or processed drafting rows: their own distribution at each position.
        judged: dict[int, tuple[mx.array, Verdict]] = {}
        for i, seq in enumerate(rows):
            rule = sampled_rule(seq.sampler)
            if drafting[i] and (rule is not None or seq.processors):
                judged[i] = self._judge(seq, logits[i], table[i], counts[i], log_q.get(i))
        mx.eval(
            greedy,
            [] if other_tokens is None else other_tokens,
            [(v.drawn, v.keep) for _, v in judged.values()],
        )
        best: list[list[int]] = greedy.tolist()  # type: ignore[assignment]
        picks: list[int] = [] if other_tokens is None else other_tokens.tolist()  # type: ignore[assignment]

        emitted: list[list[tuple[int, mx.array]]] = []
        following: list[tuple[int, mx.array]] = []  # each row's next pending token
        for i, seq in enumerate(rows):
            out = [] if i >= sampled else [(table[i][0], step.current_lp[i])]  # type: ignore[index]
            if drafting[i]:
                n, row_lp = counts[i], logprobs[i]
                draft = table[i][1 : 1 + n]
                if i in judged:
                    row_lp, row_verdict = judged[i]
                    accepted, token = settle(row_verdict, draft)
                    if (rule := sampled_rule(seq.sampler)) is not None:
                        rule.advance(accepted + 1)
                else:
                    accepted = 0
                    while accepted < n and draft[accepted] == best[i][accepted]:
                        accepted += 1
                    token = best[i][accepted]
                out.extend((draft[j], row_lp[j]) for j in range(accepted))
                spec.verified(seq.uid, n, accepted)
                following.append((token, row_lp[accepted]))
            else:
                k = other_row[i]
                assert other_lp is not None
                following.append((picks[k], other_lp[k]))
            emitted.append(out)
        if spec.drafted is not None:
            # The draft read the pending token and all but the last draft: a drafting row that
            # kept them all is one behind (it catches up when it drafts next).
            for i, (seq, out) in enumerate(zip(rows, emitted, strict=True)):
                if drafting[i] and seq.drafted_to == starts[i]:
                    seq.drafted_to += min(len(out), width - 1)

        responses: list[Token] = []
        still: list[int] = []
        unread = spec.drain()
        for i, (seq, out) in enumerate(zip(rows, emitted, strict=True)):
            finished = False
            for k, (token, lp) in enumerate(out):
                if drafting[i]:
                    seq.tokens.append(token)
                response = self._emit(seq, token, lp)
                if k == 0 and seq.uid in unread:
                    response.drafted, response.accepted = unread[seq.uid]
                responses.append(response)
                finished = response.finish_reason is not None
                if finished:
                    break
            if not finished:
                still.append(i)
        pending = None
        if still:
            pending = (
                [step.named[i] for i in still],
                mx.array([following[i][0] for i in still], dtype=mx.uint32),
                mx.stack([following[i][1] for i in still]),
            )
            mx.async_eval(pending[2])
        mx.async_eval([(s.keys, s.values) for s in self._stores])
        return responses, pending


def draft_columns(
    drafted: DraftedModel,
    first: mx.array,
    width: int,
    views: Callable[[int], list[Any]],
    rules: dict[int, RuleSampler] | None = None,
) -> tuple[mx.array, dict[int, mx.array]]:
    """[rows, width + 1]: `first` (each row's pending token) then `width` draft tokens, greedy
    but for the rows in `rules` (by row, sampled), which draw them from their rule over the
    draft's logits: their log q per draft, [width, vocabulary], come back by row.

    `views(j)` gives the draft layers' caches for the j-th draft forward (each row writing the
    j-th position past its length). Lazy: nothing is evaluated here."""
    columns = [first[:, None]]
    log_q: dict[int, list[mx.array]] = {}
    for j in range(width):
        logits = drafted.draft(columns[-1], cache=views(j))[:, -1, : drafted.vocab_size]
        columns.append(next_drafts(logits, rules or {}, j, log_q)[:, None])
    return mx.concatenate(columns, axis=1), {r: mx.stack(q) for r, q in log_q.items()}
