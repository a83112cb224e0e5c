"""The speculation policy every scheduler shares: which sequences draft, how far, and whether a
step verifies at all; with the n-gram drafter and each sequence's acceptance record.

The seam with drafters (`Drafter`): a drafter proposes, the policy sizes. n-gram prompt lookup
(the tokens that followed an earlier occurrence of the last n-gram) is per sequence and free,
so the policy runs it itself (`ngram`). A drafter that runs a model (a draft model:
`draft_model.DraftedModel`; a checkpoint's MTP head, an EAGLE-3 or DFlash drafter) is run by the
scheduler's mechanics over the batch, for the width the policy gives (`draft_width`); all the
policy asks of it is what one draft position costs (`Drafter.cost_ratio`). Every drafter's
verifies come back through `verified` (or `rest` for a step without one).

Adaptive, per sequence (`DraftRecord`): a sequence's draft length starts short, doubles toward
`--num-draft-tokens` while whole drafts are kept, and falls to just past the running mean of
what its verifies keep when one refuses; a sequence whose acceptance estimate sinks near zero
pauses drafting for a while (4 steps, doubling on each failed retry up to 64), then retries
with one token. A sampled sequence drafts only alone (`SAMPLED_BATCH`). Per step, for the
whole batch (`best_width`): a verify widens every row, so it runs only when the drafts'
expected kept tokens beat what the wider forward costs: a cost model, `OVERHEAD_TOKENS`
fitted by `tests/benchmarks/bench_speculative.py` (why a constant and not step times measured
in the loop: see the constant). A draft model reads nothing on steps that do not draft: its
cache lags the target's and catches up when it is needed (at most `MAX_LAG` behind).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from mlx_responses.service.engine.acceptance import sampled_rule

if TYPE_CHECKING:
    from mlx_responses.service.engine.draft_model import DraftedModel
    from mlx_responses.service.engine.heads import HeadedModel

NGRAM_SIZES = (3, 2)  # longest first; single tokens repeat too often to be worth a verify
PRIOR_RATE = 0.6  # assumed per-token acceptance of a sequence that has not drafted yet
RATE_WEIGHT = 0.5  # weight of the latest verify in a sequence's estimates (EWMA)
START_LENGTH = 2  # a new sequence's draft length (doubles toward the cap while all are kept)
PAUSE_RATE = 0.1  # below this per-token acceptance, a sequence stops drafting for a while
FIRST_PAUSE, LONGEST_PAUSE = 4, 64  # steps paused: the first time, and at most (doubling)
# A decode step costs about OVERHEAD_TOKENS + batch tokens' worth of work (weights read once,
# then per-token compute); a verify adds batch * draft-width tokens of it. Fitted on 2 CPU
# cores by bench_speculative.py (the 8-stream aggregate is ~4x one stream's); a GPU would want
# it larger. A constant, not step times measured in the loop: a step's wall time there is
# mostly the previous step's forward (each overlaps the next with its bookkeeping), and on a
# shared machine it is the neighbours' load as much as ours.
OVERHEAD_TOKENS = 12
# Sampled rows draft alone only (the solo path, one row): in a batch, a sampled row's verify
# (its distribution at each position, a draw per position: `acceptance.py`) cost more CPU
# than its kept drafts saved: bench_speculative.py --served, 8 streams at temperature 0.7 on a
# prompt tiny-chat repeats, 2.0-2.1 CPU ms per token with drafts (75% kept) against 1.6
# without; alone, 2.7-3.1 against 3.1-4.2. A batch-size threshold, measured.
SAMPLED_BATCH = 1
# A drafting head drafts in epochs (`StepClock`): EPOCH_TOKENS tokens sent by measured steps
# with drafting on, or off (in tokens, not steps: a round sends several, and an epoch that
# drafts must not take more of the time than one that does not); each epoch's tokens a second
# folds into its mode's estimate with EPOCH_WEIGHT; the better mode runs, the other one epoch
# in EXPLORE, that interval doubling (up to LONGEST_EXPLORE) each time the trial leaves the
# choice as it was, back to EXPLORE when it turns it; and "on" must beat "off" by
# CLOCK_MARGIN (the estimates are noisy on a shared machine, and drafting that loses costs
# more).
EPOCH_TOKENS = 48
EPOCH_WEIGHT = 0.5
EXPLORE = 8
LONGEST_EXPLORE = 64
CLOCK_MARGIN = 1.05
# A draft model's cache lags the target's on steps that do not draft; it catches up in one
# forward over the missed tokens when needed, or when it lags this far (bounds that forward).
MAX_LAG = 32


class Drafter(Protocol):
    """What the policy asks of a drafter the scheduler runs (a draft model, an MTP head, ...):
    the cost of one draft position next to one position of the target's forward over the
    same rows (e.g. their weights' bytes, as a ratio; 0: free). The scheduler's mechanics
    produce the drafts for the width `SpeculationPolicy.draft_width` gives (each row at most
    its candidate's `room`, which the policy lowers to the row's draft length) and hand each
    row's outcome back through `SpeculationPolicy.verified`."""

    def cost_ratio(self) -> float: ...


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


class StepClock:
    """Whether a drafting head pays on this machine, measured as what it changes: the decode's
    tokens a second with drafting on against off, per batch size, over alternating epochs.

    A head's weights say little about its cost on a CPU, where a forward costs its arithmetic
    (a verify over k drafts about k more forwards), nor do separate timings of a plain step
    and a round: a plain step leaves its forward in flight for the next one, a round waits for
    its own. An epoch counts steps over the same rows (a step's seconds from its start to the
    next step's, its tokens those it sent; a step after which a sequence joined or ended is
    left out) until they sent `EPOCH_TOKENS`, then its tokens a second fold into its mode's
    estimate. Both modes are
    tried first; then the better one runs, the other one epoch in `EXPLORE` (less often while
    those trials leave the choice as it was: `LONGEST_EXPLORE`). Within an "on" epoch the
    fitted cost model sizes each step's drafts (`best_width`). The seconds are the caller's:
    a CPU's scheduler gives the process's CPU seconds (what a step costs whatever the
    neighbours' load), a GPU's wall seconds."""

    def __init__(self) -> None:
        self.rates: dict[tuple[int, bool], float] = {}  # (batch, drafting) -> tokens a second
        self._open: tuple[float, tuple[int, ...], int] | None = None  # start, rows, tokens
        self._epochs: dict[int, tuple[bool, int, float, int]] = {}  # mode, steps, s, tokens
        self._since: dict[int, int] = {}  # epochs per batch size since the last trial
        self._every: dict[int, int] = {}  # per batch size: a trial of the other mode every
        self._trial: dict[int, bool] = {}  # the choice a trial running per batch size tests

    def start(self, now: float, rows: tuple[int, ...]) -> None:
        """A step of `rows` (their uids) starts at `now`: the one before is measured."""
        if self._open is not None:
            started, before, tokens = self._open
            if before == rows and rows:
                self._fold(len(rows), now - started, tokens)
        self._open = (now, rows, 0)

    def sent(self, tokens: int) -> None:
        """The step started last sent `tokens` tokens."""
        if self._open is not None:
            self._open = (self._open[0], self._open[1], self._open[2] + tokens)

    def drafting(self, batch: int) -> bool:
        """Whether the current epoch of `batch` rows drafts."""
        epoch = self._epochs.get(batch)
        if epoch is None:
            epoch = self._epochs[batch] = (self._next_mode(batch), 0, 0.0, 0)
        return epoch[0]

    def _next_mode(self, batch: int) -> bool:
        on, off = self.rates.get((batch, True)), self.rates.get((batch, False))
        if on is None or off is None:
            return on is None  # try drafting first, then without
        better = on > CLOCK_MARGIN * off
        every = self._every.get(batch, EXPLORE)
        tested = self._trial.pop(batch, None)
        if tested is not None:  # a trial just ended: it left the choice, or turned it
            every = min(LONGEST_EXPLORE, 2 * every) if tested == better else EXPLORE
            self._every[batch] = every
        since = self._since.get(batch, 0) + 1
        if since >= every:
            self._since[batch] = 0
            self._trial[batch] = better
            return not better
        self._since[batch] = since
        return better

    def _fold(self, batch: int, seconds: float, tokens: int) -> None:
        mode = self.drafting(batch)
        _, steps, total, sent = self._epochs[batch]
        steps, total, sent = steps + 1, total + seconds, sent + tokens
        if sent < EPOCH_TOKENS:
            self._epochs[batch] = (mode, steps, total, sent)
            return
        rate = sent / total if total > 0 else 0.0
        known = self.rates.get((batch, mode))
        self.rates[batch, mode] = rate if known is None else known + EPOCH_WEIGHT * (rate - known)
        self._epochs[batch] = (self._next_mode(batch), 0, 0.0, 0)

    def best_width(
        self, candidates: list[tuple[float, int]], batch: int, extra_cost: float = 0.0
    ) -> int:
        """`best_width` in an epoch that drafts; 0 in one that does not."""
        if not self.drafting(batch):
            return 0
        return best_width(candidates, batch, extra_cost)


def pays_from(cost: float) -> float:
    """The acceptance rate below which a one-token draft of a drafter of `cost` (its
    `cost_ratio`) does not pay for its verify even alone (`best_width` at one row): a sequence
    whose estimate falls under it would never draft again, and never rest back to the prior
    either, so it pauses as one that keeps nothing does (a draft model of a third of its
    target's cost: 0.41; n-gram drafts: under `PAUSE_RATE`)."""
    return 1 / (1 + OVERHEAD_TOKENS) + cost


class DraftRecord:
    """One sequence's drafting record: its per-token acceptance estimate (`rate`, for the cost
    model), the running mean of what its verifies kept (`mean`), the length its next draft may
    take (`length`) and how many more steps it rests (`paused`)."""

    def __init__(self) -> None:
        self.rate = PRIOR_RATE
        self.mean = 0.0
        self.length = START_LENGTH
        self.paused = 0
        self.probing = False  # its first verify after a pause: refused, it pauses again
        self._next_pause = FIRST_PAUSE

    def allowed(self, cap: int) -> int:
        """How far this sequence may draft now (0: paused), at most `cap`."""
        return 0 if self.paused else min(cap, max(1, self.length))

    def accepted(self, drafted: int, accepted: int, cap: int, floor: float = PAUSE_RATE) -> None:
        """Folds in a verify: `accepted` of `drafted` tokens kept (the first miss ends a draft);
        `cap` the longest draft allowed (`--num-draft-tokens`); below `floor` (at least
        `PAUSE_RATE`: what a costly drafter's draft must keep to pay, `pays_from`) it pauses."""
        if not drafted:
            self.rested()
            return
        probing, self.probing = self.probing, False
        trials = accepted + (1 if accepted < drafted else 0)
        self.rate += RATE_WEIGHT * (accepted / trials - self.rate)
        self.mean += RATE_WEIGHT * (accepted - self.mean)
        if accepted == drafted:  # all kept: the next may be longer
            self.length = min(cap, max(self.length, drafted) * 2)
            self._next_pause = FIRST_PAUSE
        else:  # refused: just past what verifies keep on average
            self.length = max(1, min(self.length, math.ceil(self.mean) + 1))
            if accepted:
                self._next_pause = FIRST_PAUSE
        if self.rate < max(PAUSE_RATE, floor) or (probing and not accepted):
            self.paused = self._next_pause
            self._next_pause = min(LONGEST_PAUSE, self._next_pause * 2)

    def rested(self) -> None:
        """A step without drafting; a paused sequence that has rested long enough retries with
        one token, its estimate back at the prior (so the cost model lets it try); refused, it
        pauses again, twice as long."""
        if self.paused:
            self.paused -= 1
            if not self.paused:
                self.rate, self.length, self.probing = PRIOR_RATE, 1, True


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
    # The most drafts it may take: its token budget and `num_draft`; the policy lowers it to
    # the sequence's own draft length (`DraftRecord.allowed`; 0: paused) before sizing a step.
    room: int
    context: list[int]  # its tokens so far (those in its slot)


@dataclass
class SpeculationPolicy:
    """Which sequences draft, how far, and what their drafts achieved: one per scheduler
    (the slots' verify steps, the batch's `SpeculativeGenerationBatch`).

    A scheduler marks the sequences that may draft (`eligible`: greedy or sampled, without a
    grammar or other processor that keeps state, from
    `Admission.speculate`), asks for n-gram drafts (`ngram`) or a model drafter's width
    (`draft_width`: the draft model's, or any `Drafter`'s) for its candidates each step, and
    folds each verify back in (`verified`, or `rest` for a step without one); a finished or
    removed sequence is forgotten."""

    num_draft: int
    drafted: DraftedModel | None = None  # None: n-gram drafts (or the MTP head's)
    head: HeadedModel | None = None  # a head on the target's hidden states drafts (heads.py)
    eligible: set[int] = field(default_factory=set)
    sampled: set[int] = field(default_factory=set)  # eligible and sampled (`SAMPLED_BATCH`)
    records: dict[int, DraftRecord] = field(default_factory=dict)
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_steps: int = 0
    # Each sequence's drafts proposed and kept since the last `drain` (its tokens carry them).
    unread: dict[int, tuple[int, int]] = field(default_factory=dict)
    _floor: float = PAUSE_RATE  # the last model drafter's `pays_from` (n-gram drafts: none)

    def admit(self, uid: int, sampler: object) -> None:
        """A sequence that may draft (`Admission.speculate`), sampled by `sampler`."""
        self.eligible.add(uid)
        if sampled_rule(sampler) is not None:
            self.sampled.add(uid)

    def forget(self, uid: int) -> None:
        """Drops a sequence's drafting state (it finished or was removed)."""
        self.eligible.discard(uid)
        self.sampled.discard(uid)
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
        self.record(uid).accepted(drafted, accepted, self.num_draft, self._floor)

    def _allow(self, candidates: list[Candidate], rows: int) -> list[int]:
        """Lowers each candidate's room to its own draft length (0: paused, or sampled in a
        batch of more than `SAMPLED_BATCH` rows); the indices of those that may draft."""
        drafting = []
        for i, candidate in enumerate(candidates):
            candidate.room = self.record(candidate.uid).allowed(candidate.room)
            if rows > SAMPLED_BATCH and candidate.uid in self.sampled:
                candidate.room = 0
            if candidate.room:
                drafting.append(i)
        return drafting

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
        allowed = set(self._allow(candidates, rows))
        for i, candidate in enumerate(candidates):
            drafter = self.record(candidate.uid)
            assert isinstance(drafter, NgramDrafter)
            drafter.sync(candidate.context)
            if i in allowed and drafter.ready():
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

    def draft_width(
        self,
        candidates: list[Candidate],
        rows: int,
        drafter: Drafter | None = None,
        clock: StepClock | None = None,
    ) -> int:
        """How far a drafter the scheduler runs drafts this step (0: not at all); `rows` is
        the forward's batch, `drafter` the draft model's pair or the MTP head unless given,
        `clock` the steps' measured seconds (else the fitted cost model decides).
        Each candidate's `room` comes back lowered to its own draft length (0: it does not
        draft: its part of the verify is its pending token alone)."""
        drafter = drafter or self.drafted or self.head
        assert drafter is not None
        allowed = self._allow(candidates, rows)
        likely = [(self.record(candidates[i].uid).rate, candidates[i].room) for i in allowed]
        cost = drafter.cost_ratio()
        self._floor = pays_from(cost)
        if clock is not None:
            return clock.best_width(likely, rows, cost)
        return best_width(likely, rows, cost)
