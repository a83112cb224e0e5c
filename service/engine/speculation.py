"""The speculation policy both schedulers share: n-gram proposals, each sequence's acceptance
record, and how wide a verify step should be.

Drafts come from the context (prompt lookup: the tokens that followed an earlier occurrence of
the last n-gram) or from a small draft model. Whether a step drafts, and how far, is decided
per step for the whole batch: a verify widens every row, so it runs only when the drafts'
expected accepted tokens (from each sequence's own acceptance record) beat what the wider
forward costs. A draft model reads nothing on steps that do not draft: its cache lags the
target's and catches up when it is needed (at most `MAX_LAG` behind).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlx_responses.service.engine.draft_model import DraftedModel
    from mlx_responses.service.engine.heads import HeadedModel

NGRAM_SIZES = (3, 2)  # longest first; single tokens repeat too often to be worth a verify
PRIOR_RATE = 0.6  # assumed per-token acceptance of a sequence that has not drafted yet
RATE_WEIGHT = 0.5  # weight of the latest verify in a sequence's acceptance estimate
RECOVERY = 0.02  # per step without drafting, the estimate moves this far back to the prior
# A decode step costs about OVERHEAD_TOKENS + batch tokens' worth of work (weights read once,
# then per-token compute); a verify adds batch * draft-width tokens of it. Fitted on 2 CPU
# cores (the bench's 8-stream aggregate is ~4x one stream's); a GPU would want it larger.
OVERHEAD_TOKENS = 12
# A draft model's cache lags the target's on steps that do not draft; it catches up in one
# forward over the missed tokens when needed, or when it lags this far (bounds that forward).
MAX_LAG = 32


def expected_accepted(rate: float, drafted: int) -> float:
    """Tokens a draft of `drafted` is expected to add when each is accepted with `rate`."""
    return sum(rate**j for j in range(1, drafted + 1))


def best_width(candidates: list[tuple[float, int]], batch: int, extra_cost: float = 0.0) -> int:
    """How many draft positions a verify step should take (0: do not verify).

    `candidates` holds (acceptance rate, draft length available) of each drafting row; every
    row of `batch` pays for the positions, and `extra_cost` per position and row is what
    producing the draft costs (a draft model's forward, relative to the target's).
    """
    if not candidates:
        return 0
    per_position = batch * (batch / (batch + OVERHEAD_TOKENS) + extra_cost)
    best, width = 0.0, 0
    for k in range(1, max(n for _, n in candidates) + 1):
        net = sum(expected_accepted(a, min(k, n)) for a, n in candidates) - per_position * k
        if net > best:
            best, width = net, k
    return width


class DraftRecord:
    """One sequence's acceptance estimate: how likely its next draft token is to be kept."""

    def __init__(self) -> None:
        self.rate = PRIOR_RATE

    def accepted(self, drafted: int, accepted: int) -> None:
        """Folds in a verify: `accepted` of `drafted` tokens kept (the first miss ends a draft)."""
        if not drafted:
            return
        trials = accepted + (1 if accepted < drafted else 0)
        self.rate += RATE_WEIGHT * (accepted / trials - self.rate)

    def rested(self) -> None:
        """A step without drafting: the estimate drifts back toward the prior, so a sequence
        whose drafts failed is tried again now and then."""
        self.rate += RECOVERY * (PRIOR_RATE - self.rate)


class NgramDrafter(DraftRecord):
    """Proposes the continuation of the latest earlier occurrence of the context's last n-gram.

    An index per n-gram size maps each n-gram to where its continuation starts, updated as
    tokens arrive, so a lookup is O(1) however long the context.
    """

    def __init__(self, sizes: tuple[int, ...] = NGRAM_SIZES) -> None:
        super().__init__()
        self.tokens: list[int] = []
        self._sizes = sizes
        self._index: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in sizes}

    def sync(self, tokens: list[int], pending: int | None = None) -> None:
        """Catches up with `tokens` (the sequence so far, a superset of ours), then `pending`."""
        for token in tokens[len(self.tokens) :]:
            self.tokens.append(token)
            self._register(len(self.tokens) - 1)
        if pending is not None:
            self.tokens.append(pending)
            self._register(len(self.tokens) - 1)

    def ready(self) -> bool:
        """Whether the context repeats right now (a draft is likely to exist).

        Asked before the pending token is known, so a step that will not draft never waits
        for it (the library's step overlaps the next forward with this one's bookkeeping).
        """
        end = len(self.tokens)
        return any(end > n and tuple(self.tokens[end - n :]) in self._index[n] for n in self._sizes)

    def _register(self, p: int) -> None:
        # The n-gram ending just before p is followed by tokens[p].
        for n in self._sizes:
            if p >= n:
                self._index[n][tuple(self.tokens[p - n : p])] = p

    def draft(self, k: int) -> list[int]:
        """Up to k tokens that followed an earlier occurrence of the current suffix.

        An occurrence close to the end (a loop) continues periodically into the draft itself.
        """
        if k <= 0:
            return []
        end = len(self.tokens)
        for n in self._sizes:
            if end > n:
                p = self._index[n].get(tuple(self.tokens[end - n :]))
                if p is not None and p < end:
                    draft = self.tokens[p : p + k]
                    while len(draft) < k:
                        draft.append(draft[len(draft) - (end - p)])
                    return draft
        return []


@dataclass
class Candidate:
    """A decoding sequence that may draft this step."""

    uid: int
    room: int  # the most drafts it may take (its token budget, `num_draft`)
    context: list[int]  # its tokens so far (those in its slot)


@dataclass
class SpeculationPolicy:
    """Which sequences draft, how far, and what their drafts achieved: one per scheduler
    (the slots' verify steps, the batch's `SpeculativeGenerationBatch`).

    A scheduler marks the sequences that may draft (`eligible`: greedy or sampled, without a
    grammar or other processor that keeps state, from
    `Admission.speculate`), asks for n-gram drafts (`ngram`) or the draft model's width
    (`draft_width`) for its candidates each step, and folds each verify back in (`verified`,
    or `rest` for a step without one); a finished or removed sequence is forgotten."""

    num_draft: int
    drafted: DraftedModel | None = None  # None: n-gram drafts (or the MTP head's)
    head: HeadedModel | None = None  # a head on the target's hidden states drafts (heads.py)
    eligible: set[int] = field(default_factory=set)
    records: dict[int, DraftRecord] = field(default_factory=dict)
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_steps: int = 0
    # Each sequence's drafts proposed and kept since the last `drain` (its tokens carry them).
    unread: dict[int, tuple[int, int]] = field(default_factory=dict)

    def forget(self, uid: int) -> None:
        """Drops a sequence's drafting state (it finished or was removed)."""
        self.eligible.discard(uid)
        self.records.pop(uid, None)

    def record(self, uid: int) -> DraftRecord:
        record = self.records.get(uid)
        if record is None:
            ngram = self.drafted is None and self.head is None
            record = NgramDrafter() if ngram else DraftRecord()
            self.records[uid] = record
        return record

    def verified(self, uid: int, drafted: int, accepted: int) -> None:
        """Folds a sequence's part of a verify into its record and the counters."""
        self.drafted_tokens += drafted
        self.accepted_tokens += accepted
        before = self.unread.get(uid, (0, 0))
        self.unread[uid] = (before[0] + drafted, before[1] + accepted)
        record = self.record(uid)
        if drafted:
            record.accepted(drafted, accepted)
        else:
            record.rested()

    def drain(self) -> dict[int, tuple[int, int]]:
        """Each sequence's (drafted, accepted) since the last call."""
        unread, self.unread = self.unread, {}
        return unread

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
        if not best_width(likely, rows):
            return None
        tokens = pending()
        drafts: list[list[int]] = [[] for _ in candidates]
        for i, drafter in ready:
            drafter.sync(candidates[i].context, tokens[i])
            drafts[i] = drafter.draft(candidates[i].room)
        found = [(d.rate, len(drafts[i])) for i, d in ready if drafts[i]]
        width = best_width(found, rows)
        if not width:
            return None
        return [draft[:width] for draft in drafts]

    def draft_width(self, candidates: list[Candidate], rows: int) -> int:
        """How far the draft model (or MTP head) drafts this step (0: not at all); `rows` is
        the forward's batch."""
        drafter = self.drafted or self.head
        assert drafter is not None
        likely = [(self.record(c.uid).rate, c.room) for c in candidates]
        return best_width(likely, rows, drafter.cost_ratio())
