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
