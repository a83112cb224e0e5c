"""Speculative decoding on the fixed KV slots: which sequences draft, how far, and their drafts.

The slots make a verify simple: a row's drafts are written into its own slot after its pending
token, and a rejected draft is undone by not counting it (its keys stay past the sequence's
length, never attended, overwritten by what comes next). Nothing of the other rows moves and no
cache is trimmed or re-padded (what mlx-lm's batched caches need, `speculative.py`), so a
sliding-window model speculates too.

The policy is the batch engine's (`speculative.best_width`, a `DraftRecord` per sequence): a
step verifies only when the drafts' expected accepted tokens beat the wider forward's cost.
Drafts come from n-gram lookup, or from a draft model whose layers have slots of their own
after the target's (`DraftedModel`). The draft reads prefill chunks with the target, but not
decode steps: each sequence's draft slot lags its target slot (`drafted_to`) and catches up in
one forward over what it missed when the sequence drafts, when it finishes (a prompt-cache
entry holds both at one offset), or when it is `MAX_LAG` behind; a step that does not draft
costs the target alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine import speculation as speculative
from mlx_responses.service.engine.draft_model import DraftedModel
from mlx_responses.service.engine.speculation import DraftRecord, NgramDrafter


@dataclass
class Candidate:
    """A decoding sequence that may draft this step."""

    uid: int
    room: int  # the most drafts it may take (its token budget, `num_draft`)
    context: list[int]  # its tokens so far (those in its slot)


@dataclass
class SlotSpeculation:
    """The speculating sequences of a SlotScheduler and what their drafts achieved.

    The worker marks the sequences that may draft (`eligible`: greedy, unconstrained) and
    reads the counters; a finished or removed sequence is forgotten."""

    num_draft: int
    drafted: DraftedModel | None = None  # None: n-gram drafts
    eligible: set[int] = field(default_factory=set)
    records: dict[int, DraftRecord] = field(default_factory=dict)
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_steps: int = 0

    def forget(self, uid: int) -> None:
        """Drops a sequence's drafting state (it finished or was removed)."""
        self.eligible.discard(uid)
        self.records.pop(uid, None)

    def record(self, uid: int) -> DraftRecord:
        record = self.records.get(uid)
        if record is None:
            record = NgramDrafter() if self.drafted is None else DraftRecord()
            self.records[uid] = record
        return record

    def verified(self, uid: int, drafted: int, accepted: int) -> None:
        """Folds a sequence's part of a verify into its record and the counters."""
        self.drafted_tokens += drafted
        self.accepted_tokens += accepted
        record = self.record(uid)
        if drafted:
            record.accepted(drafted, accepted)
        else:
            record.rested()

    def rest(self, candidates: list[Candidate]) -> None:
        """A step without a verify."""
        for candidate in candidates:
            self.record(candidate.uid).rested()

    def ngram(
        self, candidates: list[Candidate], pending: Callable[[], list[int]], rows: int
    ) -> list[list[int]] | None:
        """Each candidate's n-gram draft (one width for all: best_width's), or None when a
        verify is not worth it; `rows` is the forward's batch.

        `pending()` gives the candidates' pending tokens; it is called (and waited for) only
        when a lookup may draft, so a step that will not draft keeps its overlap of the next
        forward with this one's bookkeeping."""
        ready: list[tuple[int, NgramDrafter]] = []
        for i, candidate in enumerate(candidates):
            drafter = self.record(candidate.uid)
            assert isinstance(drafter, NgramDrafter)
            drafter.sync(candidate.context)
            if drafter.ready():
                ready.append((i, drafter))
        likely = [(d.rate, candidates[i].room) for i, d in ready]
        if not speculative.best_width(likely, rows):
            return None
        tokens = pending()
        drafts: list[list[int]] = [[] for _ in candidates]
        for i, drafter in ready:
            drafter.sync(candidates[i].context, tokens[i])
            drafts[i] = drafter.draft(candidates[i].room)
        found = [(d.rate, len(drafts[i])) for i, d in ready if drafts[i]]
        width = speculative.best_width(found, rows)
        if not width:
            return None
        return [draft[:width] for draft in drafts]

    def draft_width(self, candidates: list[Candidate], rows: int) -> int:
        """How far the draft model drafts this step (0: not at all); `rows` is the forward's
        batch."""
        assert self.drafted is not None
        likely = [(self.record(c.uid).rate, c.room) for c in candidates]
        return speculative.best_width(likely, rows, self.drafted.cost_ratio())


def draft_columns(
    drafted: DraftedModel, first: mx.array, width: int, views: Callable[[int], list[Any]]
) -> mx.array:
    """[rows, width + 1]: `first` (each row's pending token) then `width` greedy draft tokens.

    `views(j)` gives the draft layers' caches for the j-th draft forward (each row writing the
    j-th position past its length). Lazy: nothing is evaluated here."""
    columns = [first[:, None]]
    for j in range(width):
        logits = drafted.draft(columns[-1], cache=views(j))[:, -1, : drafted.vocab_size]
        columns.append(mx.argmax(logits, axis=-1).astype(mx.uint32)[:, None])
    return mx.concatenate(columns, axis=1)
