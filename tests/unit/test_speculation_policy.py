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


_OPEN: dict[int, tuple[float, tuple[int, ...]]] = {}  # each clock's open step: start, rows


def _steps(clock: StepClock, rows: tuple[int, ...], seconds: list[tuple[float, int]]) -> None:
    """Steps of `rows`, each (its seconds, its verify width: 0 a plain step), on `clock`'s
    made-up time line: each ends where the next starts (one is left open)."""
    now, open_rows = _OPEN.get(id(clock), (0.0, ()))
    if open_rows != rows:
        clock.start(now, rows)
    for interval, width in seconds:
        if width:
            clock.verifying(width)
        now += interval
        clock.start(now, rows)
    _OPEN[id(clock)] = (now, rows)


def test_a_heads_measured_round_decides_whether_it_drafts() -> None:
    """The fitted model would draft at 60% acceptance; the clock drafts only where a measured
    round gives more tokens a second than a plain step (a head that costs as much as the
    target's forward, and a cheap one)."""
    likely = [(0.6, 2)]
    assert best_width(likely, batch=1, extra_cost=0.2) >= 1
    costly, cheap = StepClock(), StepClock()
    _steps(costly, (7,), [(0.010, 0)] * 4 + [(0.030, 1), (0.040, 2)] * 3)
    assert costly.best_width(likely, 1, 0.2) == 0
    _steps(cheap, (7,), [(0.010, 0)] * 4 + [(0.012, 1), (0.014, 2)] * 3)
    assert cheap.best_width(likely, 1, 0.2) >= 1
    # Plain steps bring a refused width back toward the fitted model: it is tried again.
    steps = 0
    while not costly.best_width(likely, 1, 0.2):
        _steps(costly, (7,), [(0.010, 0)])
        steps += 1
    assert 50 < steps < 400


def test_the_clock_keeps_only_intervals_over_the_same_rows() -> None:
    """A step after which a sequence joined or ended (a prefill between, a finished row) is not
    measured; a batch size's first step is a plain one (what rounds are weighed against), and
    so is one in every PLAIN_EVERY measured rounds."""
    clock = StepClock()
    clock.start(0.0, (1,))
    clock.start(5.0, (1, 2))  # the 5 s step ended as another row joined
    clock.start(5.01, (1, 2))
    _OPEN[id(clock)] = (5.01, (1, 2))
    assert abs(clock.plain[2] - 0.01) < 1e-9 and 1 not in clock.plain
    likely = [(0.6, 2)]
    assert clock.best_width(likely, 1, 0.2) == 0
    _steps(clock, (1,), [(0.010, 0)])
    assert clock.best_width(likely, 1, 0.2) == best_width(likely, 1, 0.2)  # priced by the model
    _steps(clock, (1,), [(0.011, 2)] * speculation.PLAIN_EVERY)
    assert clock.best_width(likely, 1, 0.2) == 0
    _steps(clock, (1,), [(0.010, 0)])  # after a round: its interval is not one forward
    assert clock.best_width(likely, 1, 0.2) == 0
    _steps(clock, (1,), [(0.010, 0)])
    assert clock.best_width(likely, 1, 0.2) == 2


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
