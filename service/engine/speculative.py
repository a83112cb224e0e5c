"""Speculative decoding inside the batch: prompt-lookup (n-gram) drafts verified in one forward.

A greedy sequence whose last tokens occurred earlier in its context proposes the tokens that
followed them; the model scores the pending token and the drafts in one pass per batch, and
the longest prefix of drafts that greedy decoding would have produced is accepted. Output is
the greedy output (up to float rounding of a wider forward), only sooner.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache

from service.engine.grammar_batch import GrammarGenerationBatch
from service.engine.quantized_cache import BatchQuantizedKVCache

NGRAM_SIZES = (3, 2)  # longest first; single tokens repeat too often to be worth a verify


class NgramDrafter:
    """Proposes the continuation of the latest earlier occurrence of the context's last n-gram.

    An index per n-gram size maps each n-gram to where its continuation starts, updated as
    tokens arrive, so a lookup is O(1) however long the context.
    """

    def __init__(self, sizes: tuple[int, ...] = NGRAM_SIZES) -> None:
        self.tokens: list[int] = []
        self._skip = 0  # steps left without drafting, after drafts were rejected
        self._misses = 0
        self._limit = 1 << 30  # draft length earned by recent acceptance
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
        """Whether to draft this step: not backing off, and the context repeats right now.

        Asked before the pending token is known, so a step that will not draft never waits
        for it (the library's step overlaps the next forward with this one's bookkeeping).
        """
        if self._skip > 0:
            self._skip -= 1
            return False
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
        k = min(k, self._limit)
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

    def accepted(self, drafted: int, accepted: int) -> None:
        """Adapts to how drafts fare: a wholly rejected one backs off (1, 3, … 63 steps) and
        shrinks the next to one token; a wholly accepted one doubles the next one's length."""
        if not drafted:
            return
        if not accepted:
            self._misses = min(self._misses + 1, 6)
            self._skip = (1 << self._misses) - 1
            self._limit = 1
            return
        self._misses = 0
        self._limit = drafted * 2 if accepted == drafted else accepted + 1


class SpeculativeGenerationBatch(GrammarGenerationBatch):
    """A GenerationBatch whose decode step verifies n-gram drafts of greedy sequences.

    NOTE: it works on GenerationBatch's state (pending tokens, caches, matchers) of the pinned
    mlx-lm; sequences with logits processors or a non-greedy sampler are never drafted for, and
    a step where nobody has a draft is the library's own step.
    """

    num_draft: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.drafters: dict[int, NgramDrafter] = {}
        self.eligible: set[int] = set()
        self.drafted_tokens = 0
        self.accepted_tokens = 0
        self.verify_steps = 0
        super().__init__(*args, **kwargs)

    def next(self) -> list[Any]:
        if not self.uids or self.num_draft <= 0 or not self.eligible.intersection(self.uids):
            return super().next()
        if not all(isinstance(c, BatchKVCache | BatchQuantizedKVCache) for c in self.prompt_cache):
            return super().next()
        ready: dict[int, NgramDrafter] = {}
        for i, uid in enumerate(self.uids):
            if uid not in self.eligible:
                continue
            drafter = self.drafters.get(uid)
            if drafter is None:
                drafter = self.drafters[uid] = NgramDrafter()
            drafter.sync(self.tokens[i])
            if drafter.ready():
                ready[i] = drafter
        if not ready:
            return super().next()
        mx.eval(self._next_tokens)
        pending: list[int] = self._next_tokens.tolist()  # type: ignore[assignment]
        drafts: list[list[int]] = []
        for i in range(len(self.uids)):
            if i not in ready:
                drafts.append([])
                continue
            ready[i].sync(self.tokens[i], pending[i])
            room = self.max_tokens[i] - self._num_tokens[i] - 1
            drafts.append(ready[i].draft(min(self.num_draft, room)))
        if not any(drafts):
            return super().next()
        return self._verify(pending, drafts)

    def _verify(self, pending: list[int], drafts: list[list[int]]) -> list[Any]:
        width = 1 + max(len(d) for d in drafts)
        rows = [[pending[i], *d] + [0] * (width - 1 - len(d)) for i, d in enumerate(drafts)]
        inputs = mx.array(rows, dtype=mx.uint32)
        logits = self.model(inputs, cache=self.prompt_cache)
        self._current_tokens = inputs[:, 0]  # type: ignore[assignment]

        # Undrafted sequences sample their first position as the library's step would.
        sampled: dict[int, mx.array] = {}
        first: dict[int, mx.array] = {}
        for i, uid in enumerate(self.uids):
            if uid in self.eligible:
                continue
            row = logits[i : i + 1, 0, :]
            processors = (self.logits_processors or [])[i] or ()
            if processors:
                context = self._token_context[i].update_and_fetch(inputs[i : i + 1, 0])
                for processor in processors:
                    row = processor(context, row)
            lp = row - mx.logsumexp(row, axis=-1, keepdims=True)
            sampler = self.samplers[i] if self.samplers else self.fallback_sampler
            sampled[i] = sampler(lp)
            first[i] = lp[0]
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        greedy = mx.argmax(logprobs, axis=-1)
        mx.eval(greedy, logprobs, list(sampled.values()), list(first.values()))
        best: list[list[int]] = greedy.tolist()  # type: ignore[assignment]
        self.verify_steps += 1

        emitted: list[list[tuple[int, mx.array]]] = []
        next_tokens: list[int] = []
        next_logprobs: list[mx.array] = []
        for i, draft in enumerate(drafts):
            out = [(pending[i], self._next_logprobs[i])]
            if i in sampled:
                next_tokens.append(int(sampled[i].reshape(-1)[0].item()))  # type: ignore[arg-type]
                next_logprobs.append(first[i])
            else:
                accepted = 0
                while accepted < len(draft) and draft[accepted] == best[i][accepted]:
                    out.append((draft[accepted], logprobs[i, accepted]))
                    accepted += 1
                self.drafted_tokens += len(draft)
                self.accepted_tokens += accepted
                self.drafters[self.uids[i]].accepted(len(draft), accepted)
                next_tokens.append(best[i][accepted])
                next_logprobs.append(logprobs[i, accepted])
            emitted.append(out)

        finish: list[str | None] = []
        for i, out in enumerate(emitted):
            reason = None
            for j, (token, _) in enumerate(out):
                self._num_tokens[i] += 1
                if self._num_tokens[i] >= self.max_tokens[i]:
                    reason = "length"
                if self._matchers[i].advance(token):
                    reason = "stop"
                if reason is not None:
                    del out[j + 1 :]
                    break
            finish.append(reason)
            self.tokens[i].extend(token for token, _ in out)

        self._drop_rejected([width - len(out) for out in emitted])
        self._next_tokens = mx.array(next_tokens, dtype=mx.uint32)
        self._next_logprobs = next_logprobs

        responses = []
        keep = []
        for i, out in enumerate(emitted):
            uid = self.uids[i]
            for j, (token, lp) in enumerate(out):
                last = j == len(out) - 1 and finish[i] is not None
                responses.append(
                    self.Response(
                        uid=uid,
                        token=token,
                        logprobs=lp,
                        finish_reason=finish[i] if last else None,
                        prompt_cache=self.extract_cache(i) if last else None,
                        all_tokens=self.tokens[i] if last else None,
                    )
                )
            if finish[i] is None:
                keep.append(i)
            else:
                self.drafters.pop(uid, None)
                self.eligible.discard(uid)
        if len(keep) < len(self.uids):
            self.filter(keep)
        return responses

    def _drop_rejected(self, rejected: list[int]) -> None:
        """Removes each row's trailing rejected positions from the KV cache.

        The common part is trimmed; the rest becomes left padding (rolled to the front, as
        mlx-lm finalizes a right-padded prefill), compacted once it wastes too much.
        """
        common = min(rejected)
        rest = [r - common for r in rejected]
        for c in self.prompt_cache:
            if common:
                c.trim(common)
            if any(rest):
                c.prepare(right_padding=rest)
                c.finalize()
        if any(rest):
            self._compact()

    def _compact(self) -> None:
        first = self.prompt_cache[0]
        padding = first.left_padding.tolist()
        if max(padding) - min(padding) <= max(64, first.size() // 4):
            return
        self.prompt_cache = [
            type(c).merge([c.extract(i) for i in range(len(self.uids))]) for c in self.prompt_cache
        ]
