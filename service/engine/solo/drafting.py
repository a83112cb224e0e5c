"""n-gram drafts for the lone sequence, verified on its own cache (`--speculative ngram`).

A lone sequence decodes on the solo path (`sequence.py`: a plain cache, the next forward
queued before the host reads a token), measured faster than any batch of one. With drafting on,
it stays there and drafts there: a step asks the shared policy (`speculation.py`) whether its
context repeats; when it does not, the step is the solo path's own, overlap and all (the policy
looks the n-gram up before waiting for the pending token). When it does, one forward scores the
pending token and its drafts, the drafts are kept as the slots keep them (a greedy row's up to
the first its argmax disagrees with; a sampled one's by the point-mass rule,
`acceptance.py`, with the keys its sampler would use: a seeded request's tokens are the
same with and without drafting), and the refused positions are trimmed off the cache.

Only caches that can be trimmed draft (plain, quantized, a window the verify does not fill); a
sequence with logits processors never runs here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mlx.core as mx
from mlx_responses.service.engine.acceptance import sampled_rule, settle, verdict
from mlx_responses.service.engine.mlx_lm_compat import can_trim_prompt_cache, trim_prompt_cache
from mlx_responses.service.engine.scheduler import Token
from mlx_responses.service.engine.speculation import Candidate, SpeculationPolicy

if TYPE_CHECKING:
    from mlx_responses.service.engine.solo.sequence import SoloSequence


def _rewinds(cache: list[Any], width: int) -> bool:
    """Whether `width` positions fed to `cache` can be trimmed off again: a window (a rotating
    cache) only while they fit in it unrotated."""
    if not can_trim_prompt_cache(cache):
        return False
    # A cache of caches (mlx-lm's CacheList, e.g. minimax_m3_vl's) holds no offset of its own:
    # it does not draft, as the batch's drafting declines it (the startup warning says so).
    return all(
        hasattr(c, "offset") and c.offset + width <= getattr(c, "max_size", c.offset + width)
        for c in cache
    )


class SoloDrafts:
    """The solo path's drafting: one policy (its records, its counters) for lone sequences."""

    def __init__(self, num_draft: int) -> None:
        self.policy = SpeculationPolicy(num_draft)

    def forget(self, uid: int) -> None:
        """Drops a sequence's record (it finished, left or was handed over)."""
        self.policy.forget(uid)
        self.policy.unread.pop(uid, None)

    def step(self, seq: SoloSequence) -> list[Token] | None:
        """A verify step of `seq`'s pending token and drafts: the tokens sent (the first
        carries the drafts proposed and kept); None: no drafts this step (the caller steps)."""
        pending = seq.pending
        room = min(self.policy.num_draft, seq.max_tokens - seq.generated - 1)
        if pending is None or room <= 0 or seq.logits_processors:
            return None
        if not _rewinds(seq.cache, room + 1):
            return None
        candidate = Candidate(seq.uid, room, seq.tokens)
        value: list[int] = []

        def token() -> list[int]:  # waited for only when the context repeats
            value.append(int(pending[0].item()))  # type: ignore[arg-type]
            return value

        found = self.policy.ngram([candidate], token, rows=1)
        if found is None:
            self.policy.rest([candidate])
            return None
        return self._verify(seq, value[0], found[0])

    def _verify(self, seq: SoloSequence, first: int, draft: list[int]) -> list[Token]:
        assert seq.pending is not None
        first_lp = seq.pending[1]
        n = len(draft)
        with mx.stream(seq.stream):
            inputs = mx.array([[first, *draft]], dtype=mx.uint32)
            logits = seq.model(inputs, cache=seq.cache)[0]
            lp = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
            judged = verdict(seq.sampler, lp, draft, None)
            mx.eval(judged.drawn)
            accepted, following = settle(judged, draft)
            rule = sampled_rule(seq.sampler)
            if rule is not None:
                rule.advance(accepted + 1)
            self.policy.verified(seq.uid, n, accepted)
            self.policy.verify_steps += 1
            self.policy.unread.pop(seq.uid, None)
            sent: list[Token] = []
            out = [(first, first_lp), *((draft[j], lp[j]) for j in range(accepted))]
            kept = len(out)
            for token, logprobs in out:
                sent.append(seq.sent(token, logprobs))
                if sent[-1].finish_reason is not None:
                    break
            # The cache holds what was fed: the sent tokens, no refused draft nor any after a
            # stop (a finished sequence's cache is its prompt-cache entry).
            trim_prompt_cache(seq.cache, n + 1 - len(sent))
            if sent[-1].finish_reason is None:
                seq.pending = (mx.array([following], dtype=mx.uint32), lp[kept - 1])
                mx.async_eval(seq.pending[1])
            else:
                seq.pending = None
                self.forget(seq.uid)
        sent[0].drafted, sent[0].accepted = n, accepted
        return sent
