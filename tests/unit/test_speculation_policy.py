"""The adaptive speculation policy, deterministically: acceptance sequences in, lengths out."""

from __future__ import annotations

from mlx_responses.service.engine import speculation
from mlx_responses.service.engine.speculation import (
    Candidate,
    DraftRecord,
    SpeculationPolicy,
    StepClock,
    best_width,
)

CAP = 8


def _lengths(outcomes: list[tuple[int, int] | None], cap: int = CAP) -> list[int]:
    """The length each step may draft, given each step's (drafted, accepted), None a step that
    did not verify; a step drafts what it may (`allowed`) unless the outcome says otherwise."""
    record = DraftRecord()
    seen = []
    for outcome in outcomes:
        seen.append(record.allowed(cap))
        if outcome is None:
            record.rested()
        else:
            record.accepted(*outcome, cap)
    seen.append(record.allowed(cap))
    return seen


def test_the_draft_length_grows_toward_the_cap_while_whole_drafts_are_kept() -> None:
    assert _lengths([(2, 2), (4, 4), (8, 8), (8, 8)]) == [2, 4, 8, 8, 8]
    # The cap is --num-draft-tokens: a lower one stops the growth there.
    assert _lengths([(2, 2), (3, 3)], cap=3) == [2, 3, 3]


def test_the_draft_length_shrinks_on_refusals_to_just_past_what_is_kept() -> None:
    seen = _lengths([(2, 2), (4, 4), (8, 8), (8, 2), (4, 1), (2, 1)])
    assert seen == [2, 4, 8, 8, 5, 4, 3]
    # Long drafts that keep about 3 settle at 4 or 5, not at the cap nor at 1.
    steady = _lengths([(2, 2), (4, 4)] + [(8, 3)] * 6)
    assert steady[-1] in (4, 5) and steady[-1] < CAP


def test_a_sequence_whose_drafts_all_fail_pauses_and_retries_later_with_one_token() -> None:
    record = DraftRecord()
    for _ in range(3):
        record.accepted(record.allowed(CAP), 0, CAP)
    assert record.rate < speculation.PAUSE_RATE
    assert record.allowed(CAP) == 0  # paused
    for _ in range(speculation.FIRST_PAUSE - 1):
        record.rested()
        assert record.allowed(CAP) == 0
    record.rested()
    assert record.allowed(CAP) == 1  # retried, one token
    assert best_width([(record.rate, 1)], batch=1) == 1  # and the cost model lets it try
    # A refused retry pauses again, twice as long; a kept one resumes drafting.
    record.accepted(1, 0, CAP)
    pauses = 0
    while not record.allowed(CAP):
        record.rested()
        pauses += 1
    assert pauses == 2 * speculation.FIRST_PAUSE
    record.accepted(1, 1, CAP)
    assert record.allowed(CAP) == 2 and not record.paused


def test_pauses_double_up_to_the_longest() -> None:
    record = DraftRecord()
    for _ in range(3):
        record.accepted(1, 0, CAP)
    pauses = []
    for _ in range(6):
        n = 0
        while not record.allowed(CAP):
            record.rested()
            n += 1
        pauses.append(n)
        record.accepted(1, 0, CAP)  # the retry refused
    first = speculation.FIRST_PAUSE
    assert pauses == [first, 2 * first, 4 * first, 8 * first, 16 * first, 16 * first]
    assert 16 * first == speculation.LONGEST_PAUSE


def test_a_verify_where_a_row_drafted_nothing_is_a_rest_for_it() -> None:
    record = DraftRecord()
    for _ in range(3):
        record.accepted(2, 0, CAP)
    for _ in range(speculation.FIRST_PAUSE):
        record.accepted(0, 0, CAP)
    assert record.allowed(CAP) == 1


def test_the_policy_caps_each_candidate_to_its_own_length_and_skips_paused_ones() -> None:
    class Costly:
        def cost_ratio(self) -> float:
            return 0.05

    policy = SpeculationPolicy(CAP)
    sure, doubtful, failing = (Candidate(uid, CAP, []) for uid in (1, 2, 3))
    for _ in range(3):
        policy.verified(1, policy.record(1).allowed(CAP), policy.record(1).allowed(CAP))
        policy.verified(2, 4, 1)
        policy.verified(3, 4, 0)
    width = policy.draft_width([sure, doubtful, failing], rows=3, drafter=Costly())
    assert (sure.room, doubtful.room, failing.room) == (8, 2, 0)
    assert 1 <= width <= 8
    # Room left by the token budget is respected too.
    short = Candidate(1, 3, [])
    policy.draft_width([short], rows=1, drafter=Costly())
    assert short.room == 3


def test_drafting_steps_aside_in_a_large_batch_unless_drafts_are_sure() -> None:
    sure, doubtful = DraftRecord(), DraftRecord()
    for _ in range(5):
        sure.accepted(8, 8, CAP)
        doubtful.accepted(4, 1, CAP)
    assert best_width([(sure.rate, 8)] * 8, batch=8) == 8  # drafts that always land: all of it
    narrow = best_width([(doubtful.rate, 8)], batch=1)
    assert 1 <= narrow < 8
    # One doubtful sequence does not widen a batch of 16 others for its sake, and at 32
    # doubtful rows the verify costs more than it saves.
    assert best_width([(doubtful.rate, 8)], batch=16) == 0
    assert best_width([(doubtful.rate, 8)] * 32, batch=32) == 0
    # A costly draft model narrows (or stops) what a free n-gram lookup would take.
    assert best_width([(doubtful.rate, 8)], batch=1, extra_cost=1.0) == 0


def _run(
    clock: StepClock,
    steps: int,
    on: tuple[float, int],
    off: tuple[float, int],
    start: float | None = None,
) -> int:
    """`steps` steps of one row on a made-up time line (from `start`, else a fresh one), each
    (seconds, tokens sent) as its epoch drafts (`on`) or not (`off`); how many of them
    drafted."""
    now, drafted = 1000.0 * len(clock.rates) if start is None else start, 0
    for _ in range(steps):
        drafting = clock.best_width([(0.8, 4)], 1) > 0
        drafted += drafting
        seconds, tokens = on if drafting else off
        clock.start(now, (7,))
        clock.sent(tokens)
        now += seconds
    return drafted


def test_a_head_drafts_in_the_epochs_where_it_pays() -> None:
    """The fitted model would draft at 80% acceptance whatever a round costs; the clock
    measures tokens a second with drafting on and off and keeps to the better, trying the
    other one epoch in EXPLORE (a round that costs as much as the forwards it saves, and a
    cheap one)."""
    n = speculation.EPOCH_TOKENS * speculation.EXPLORE * 3
    costly, cheap = StepClock(), StepClock()
    drafted = _run(costly, n, on=(0.012, 2), off=(0.005, 1))  # 167 tokens a second vs 200
    assert drafted < 0.2 * n
    assert costly.rates[1, True] < costly.rates[1, False]
    assert _run(cheap, n, on=(0.006, 2), off=(0.005, 1)) > 0.65 * n  # 333 vs 200


def test_trials_of_drafting_that_keeps_losing_come_less_often() -> None:
    """Each trial that leaves the choice as it was puts the next one twice as far (up to
    LONGEST_EXPLORE epochs): drafting that loses is tried on a few percent of the steps,
    not one epoch in EXPLORE for ever (7% of them here); one that starts to pay is still
    found."""
    n = speculation.EPOCH_TOKENS * speculation.LONGEST_EXPLORE * 4
    clock = StepClock()
    assert _run(clock, n, on=(0.012, 2), off=(0.005, 1), start=0.0) < 0.03 * n
    # Drafting pays from now on (a later part of the same time line): the next trial, at most
    # LONGEST_EXPLORE epochs away, turns the choice.
    assert _run(clock, n, on=(0.002, 2), off=(0.005, 1), start=1000.0) > 0.65 * n


def test_the_clock_keeps_only_intervals_over_the_same_rows() -> None:
    """A step after which a sequence joined or ended (a prefill between, a finished row) is not
    measured: an epoch of steps whose rows changed every step never ends."""
    clock = StepClock()
    for i in range(3 * speculation.EPOCH_TOKENS):
        clock.start(float(i), (i,))
        clock.sent(1)
    assert clock.rates == {}
    assert clock.best_width([(0.8, 4)], 1) >= 1  # the first epochs draft


def test_ngram_drafts_take_each_sequences_own_length() -> None:
    policy = SpeculationPolicy(CAP)
    loop = [5, 6, 7] * 6
    first, second = Candidate(1, CAP, loop), Candidate(2, CAP, loop)
    for _ in range(2):
        policy.verified(2, 2, 2)  # sequence 2 kept whole drafts: it may take 8
    drafts = policy.ngram([first, second], lambda: [5, 5], rows=2)
    assert drafts is not None
    assert [len(d) for d in drafts] == [2, 8]


def test_a_sampled_sequence_drafts_alone_but_not_in_a_batch() -> None:
    from mlx_responses.service.engine.seeded_sampler import RuleSampler

    policy = SpeculationPolicy(CAP)
    policy.admit(1, RuleSampler(0.7, 1.0, 0, None))
    policy.admit(2, None)  # greedy
    loop = [5, 6, 7] * 6
    assert policy.sampled == {1} and policy.eligible == {1, 2}
    alone = policy.ngram([Candidate(1, CAP, loop)], lambda: [5], rows=1)
    assert alone is not None and alone[0]
    batched = policy.ngram([Candidate(1, CAP, loop), Candidate(2, CAP, loop)], lambda: [5, 5], 2)
    assert batched is not None and batched[0] == [] and batched[1]
    policy.forget(1)
    assert policy.sampled == set()


def test_a_costly_drafters_sequence_that_keeps_too_little_to_pay_pauses_and_retries() -> None:
    """A draft model of a third of its target's cost: one refused draft brings a sequence's
    estimate (0.3) under what a draft of it pays (0.41) yet above `PAUSE_RATE`; it pauses and
    retries from the prior, where before it neither drafted nor rested again."""

    class Third:
        def cost_ratio(self) -> float:
            return 1 / 3

    policy = SpeculationPolicy(CAP)
    row = Candidate(1, CAP, [])
    assert policy.draft_width([row], rows=1, drafter=Third()) == 1
    policy.verified(1, 1, 0)
    assert speculation.PAUSE_RATE < policy.record(1).rate < speculation.pays_from(1 / 3)
    widths = []
    for _ in range(speculation.FIRST_PAUSE + 1):
        row = Candidate(1, CAP, [])
        widths.append(policy.draft_width([row], rows=1, drafter=Third()))
        if not widths[-1]:
            policy.rest([row])
    assert widths == [0] * speculation.FIRST_PAUSE + [1]
