"""Speculative decoding inside the batch: drafts of each sequence verified in one forward.

Drafts come from the context (prompt lookup: the tokens that followed an earlier occurrence of
the last n-gram) or from a small draft model run over the whole batch. The target model scores
every sequence's pending token and its drafts in one pass. A greedy sequence keeps the longest
prefix of drafts that greedy decoding would have produced: its output is the greedy output (up
to float rounding of a wider forward), only sooner. A sampled one (or one with penalties) keeps
drafts by exact speculative sampling (`acceptance.py`): its tokens keep their distribution.

Whether a step drafts, and how far, is decided per step for the whole batch: a verify widens
every row, so it runs only when the drafts' expected accepted tokens (from each sequence's own
acceptance record) beat what the wider forward costs. A draft model reads nothing on steps
that do not draft: its cache lags the target's and catches up when it is needed.
"""

from __future__ import annotations

import time
from typing import Any, cast

import mlx.core as mx
from mlx_responses.service.engine import speculation
from mlx_responses.service.engine.acceptance import (
    Verdict,
    next_drafts,
    sampled_rule,
    settle,
    target_logprobs,
    verdict,
)
from mlx_responses.service.engine.batch.feed import feed
from mlx_responses.service.engine.batch.grammar_batch import GrammarGenerationBatch
from mlx_responses.service.engine.batch.mlx_lm_compat import BatchKVCache
from mlx_responses.service.engine.batch.quantized_cache import BatchQuantizedKVCache
from mlx_responses.service.engine.draft_model import DraftedModel
from mlx_responses.service.engine.heads import HeadedModel
from mlx_responses.service.engine.mlx_lm_compat import ArraysCache
from mlx_responses.service.engine.speculation import Candidate, SpeculationPolicy, StepClock
from mlx_responses.service.engine.vision.hybrid import roll_back


class SpeculativeGenerationBatch(GrammarGenerationBatch):
    """A GenerationBatch whose decode step verifies drafts.

    With `drafted` set (its model is then a DraftedModel) drafts come from the draft model,
    else from n-gram lookup. NOTE: it works on GenerationBatch's state (pending tokens, caches,
    matchers) of the pinned mlx-lm; sequences with a processor that keeps state (a grammar) are
    never drafted for, and a step without drafts is the library's own step (with a draft
    model, a step of the target alone).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Inputs the target read alone, one [batch, 1] per step: the draft's cache lags by as
        # many positions in every row (each such step adds one token to each row).
        self._missed: list[mx.array] = []
        # Which sequences draft and how far: the policy the slots use too.
        self.policy = SpeculationPolicy(0)
        # A drafting head reading the target's hidden states (an MTP or EAGLE-3 head: its
        # model is then a HeadedModel; `use_head`).
        self.headed: HeadedModel | None = None
        # A verify's target hidden states, and the recurrent states before it (`_keep`).
        self._verified: mx.array | None = None
        self._before: list[tuple[Any, tuple[list[Any], Any, Any]]] = []
        self._recorded: list[tuple[Any, mx.array, mx.array]] | None = None
        # What the target read alone (its inputs and features, [batch, 1] each step): the
        # head's caches lag by as many positions in every row, as a draft model's do.
        self._unread: list[tuple[mx.array, mx.array]] = []
        # Whether a head's drafting pays, measured in epochs (`_head_draft`): in the process's
        # CPU seconds on a CPU (a step's wall time there is the neighbours' load as much as
        # ours: measured wall, drafting lost 0.47x at 8 streams), else in wall seconds.
        self.clock = StepClock()
        cpu = mx.default_device() == mx.cpu
        self._now = time.process_time if cpu else time.perf_counter
        super().__init__(*args, **kwargs)

    def use_head(self, model: HeadedModel) -> None:
        """Drafts come from the model's head (heads.py); a step that does not draft runs the
        target alone (the library calls `self.model`), the head reading what it missed when
        it drafts next (or before its caches are extracted or joined, or at `MAX_LAG`)."""
        self.headed = model
        self.policy.head = model

        def alone(inputs: mx.array, cache: list[Any], **kwargs: Any) -> mx.array:
            return self._head_alone(inputs, cache)

        hook = getattr(model, "feed", None)
        if hook is not None:  # a VLM's language side is told its rows (batch/feed.py)
            alone.feed = hook  # type: ignore[attr-defined]
        self.model = cast(Any, alone)

    @property
    def num_draft(self) -> int:
        return self.policy.num_draft

    @num_draft.setter
    def num_draft(self, n: int) -> None:
        self.policy.num_draft = n

    @property
    def eligible(self) -> set[int]:
        """The uids that may draft (no grammar: `Admission.speculate`)."""
        return self.policy.eligible

    @property
    def drafted_tokens(self) -> int:
        return self.policy.drafted_tokens

    @property
    def accepted_tokens(self) -> int:
        return self.policy.accepted_tokens

    @property
    def verify_steps(self) -> int:
        return self.policy.verify_steps

    @property
    def drafted(self) -> DraftedModel | None:
        """The target paired with its draft model (None: n-gram drafts)."""
        return self.policy.drafted

    @drafted.setter
    def drafted(self, pair: DraftedModel | None) -> None:
        self.policy.drafted = pair
        if pair is not None:
            self.model = cast(Any, self._target_alone)  # the library calls self.model

    @property
    def lag(self) -> int:
        """How many positions the draft's cache is behind the target's, in every row."""
        return len(self._missed)

    def _target_alone(self, inputs: mx.array, cache: list[Any], **kwargs: Any) -> mx.array:
        """The forward of a step that does not draft: the draft reads `inputs` later."""
        assert self.drafted is not None
        if len(self._missed) >= speculation.MAX_LAG:
            self._catch_up()
        self._missed.append(inputs)
        out: mx.array = self.drafted.target(inputs, cache=cache[: self.drafted.split], **kwargs)
        return out

    def _head_alone(self, inputs: mx.array, cache: list[Any]) -> mx.array:
        """The forward of a step that does not draft: the head reads it later."""
        assert self.headed is not None
        if len(self._unread) >= speculation.MAX_LAG:
            self._catch_up()
        logits, features = self.headed.forward(inputs, cache)
        self._unread.append((inputs, features))
        return logits

    def _catch_up(self) -> None:
        """The draft (or head) reads what it missed, in one forward (before its cache is used
        or moved)."""
        if self._unread and self.headed is not None:
            unread, self._unread = self._unread, []
            inputs = mx.concatenate([i for i, _ in unread], axis=1)
            features = mx.concatenate([f for _, f in unread], axis=1)
            self.headed.read(inputs, features, self.prompt_cache)
        if self._missed and self.drafted is not None:
            missed, self._missed = self._missed, []
            self.drafted.draft_reads(mx.concatenate(missed, axis=1), self.prompt_cache)

    def extend(self, batch: Any) -> None:
        self._catch_up()  # the new rows' draft caches are up to date
        super().extend(batch)

    def _copy(self, idx: int) -> list[Any]:
        self._catch_up()  # a prompt-cache entry holds both caches at the same position
        caches: list[Any] = super()._copy(idx)
        return caches

    def filter(self, keep: list[int]) -> None:
        super().filter(keep)
        if self._missed:
            missed = mx.concatenate(self._missed, axis=1)
            self._missed = [missed[mx.array(keep)]] if keep else []
        if self._unread:
            rows = mx.array(keep)
            self._unread = [(i[rows], f[rows]) for i, f in self._unread] if keep else []

    def forget(self, uid: int) -> None:
        """Drops a sequence's drafting state (it finished or was removed)."""
        self.policy.forget(uid)

    def _room(self, i: int) -> int:
        return min(self.num_draft, self.max_tokens[i] - self._num_tokens[i] - 1)

    def next(self) -> list[Any]:
        if self.headed is None:
            return super().next()
        self.clock.start(self._now(), tuple(self.uids))
        responses: list[Any] = super().next()
        self.clock.sent(len(responses))
        return responses

    def _decode(self) -> list[Any]:
        if not self.uids or self.num_draft <= 0 or not self.eligible.intersection(self.uids):
            return super()._decode()
        # Rejected drafts are trimmed off plain caches; with a head, recurrent states are
        # computed again up to the kept positions (`_keep_head`).
        rewinds: tuple[type, ...] = (BatchKVCache, BatchQuantizedKVCache)
        if self.headed is not None:
            rewinds = (*rewinds, ArraysCache)
        if not all(isinstance(c, rewinds) for c in self.prompt_cache):
            return super()._decode()
        # The rows that may draft this step (`which`), as the policy's candidates.
        which = [i for i, uid in enumerate(self.uids) if uid in self.eligible and self._room(i) > 0]
        candidates = [Candidate(self.uids[i], self._room(i), self.tokens[i]) for i in which]
        responses = None
        if candidates:
            if self.headed is not None:
                responses = self._head_draft(candidates, which)
            elif self.drafted is None:
                responses = self._ngram(candidates, which)
            else:
                responses = self._draft(candidates, which)
        if responses is None:
            self.policy.rest(candidates)
            return super()._decode()
        return responses

    def _ngram(self, candidates: list[Candidate], which: list[int]) -> list[Any] | None:
        batch = len(self.uids)
        pending: list[int] = []

        def tokens() -> list[int]:
            # Waited for only when a lookup may draft (no wait for a step that will not).
            mx.eval(self._next_tokens)
            pending.extend(self._next_tokens.tolist())  # type: ignore[arg-type]
            return [pending[i] for i in which]

        found = self.policy.ngram(candidates, tokens, batch)
        if found is None:
            return None
        width = max(len(d) for d in found)
        drafts: dict[int, list[int]] = dict(zip(which, found, strict=True))
        lengths = [len(drafts.get(i, [])) for i in range(batch)]
        rows = [[pending[i], *drafts.get(i, [])] + [0] * (width - n) for i, n in enumerate(lengths)]
        return self._verify(mx.array(rows, dtype=mx.uint32), lengths)

    def _draft(self, candidates: list[Candidate], which: list[int]) -> list[Any] | None:
        assert self.drafted is not None
        width = self.policy.draft_width(candidates, len(self.uids))
        if not width:
            return None
        room = {i: c.room for i, c in zip(which, candidates, strict=True)}
        # The draft runs greedily over the whole batch, from the pending tokens (not waited
        # for), its first forward reading what it missed too: one graph with the verify,
        # evaluated once.
        token = self._next_tokens[:, None]
        columns = [token]
        missed, self._missed = self._missed, []
        inputs = mx.concatenate([*missed, token], axis=1)
        # The sampled rows draw their drafts from their rule over the draft's logits (q).
        rules = {i: rule for i in which if (rule := sampled_rule(self._sampler(i))) is not None}
        log_q: dict[int, list[mx.array]] = {}
        for j in range(width):
            logits = self.drafted.draft_logits(inputs, self.prompt_cache)
            inputs = next_drafts(logits, rules, j, log_q)[:, None]
            columns.append(inputs)
        lengths = [min(width, room.get(i, 0)) for i in range(len(self.uids))]
        drawn_from = {i: mx.stack(q)[: lengths[i]] for i, q in log_q.items()}
        return self._verify(mx.concatenate(columns, axis=1), lengths, drawn_from)

    def _head_draft(self, candidates: list[Candidate], which: list[int]) -> list[Any] | None:
        """Drafts of the head (`HeadedModel.drafts`) from each row's pending token (not waited
        for), over the whole batch: one graph with the verify. A sampled row draws its drafts
        from its rule over the head's logits."""
        headed = self.headed
        assert headed is not None
        width = self.policy.draft_width(candidates, len(self.uids), clock=self.clock)
        if not width:
            return None
        self._catch_up()
        room = {i: c.room for i, c in zip(which, candidates, strict=True)}
        rules = {i: rule for i in which if (rule := sampled_rule(self._sampler(i))) is not None}
        log_q: dict[int, list[mx.array]] = {}
        pending = self._next_tokens
        drafts = headed.drafts(pending, width, self.prompt_cache, rules, log_q)
        columns = [pending[:, None], *drafts]
        lengths = [min(width, room.get(i, 0)) for i in range(len(self.uids))]
        drawn_from = {i: mx.stack(q)[: lengths[i]] for i, q in log_q.items()}
        return self._verify(mx.concatenate(columns, axis=1), lengths, drawn_from)

    def _target(self, inputs: mx.array) -> mx.array:
        if self.headed is not None:
            headed = self.headed
            self._before = [
                (c, (list(c.cache), c.left_padding, c.lengths))
                for c in self.prompt_cache[: headed.split]
                if isinstance(c, ArraysCache)
            ]
            feed(headed, self.uids, self.tokens)
            # A target that records its recurrent states per position rolls back from them.
            recorder = headed.target if hasattr(headed.target, "record") else None
            self._recorded = None if recorder is None else []
            if recorder is not None:
                recorder.record = self._recorded
            logits, features = headed.forward(inputs, self.prompt_cache)
            if recorder is not None:
                recorder.record = None
            headed.read_verified(inputs, features, self.prompt_cache)
            self._verified = features
            return logits
        if self.drafted is None:
            out: mx.array = self.model(inputs, cache=self.prompt_cache)
            return out
        out = self.drafted.target(inputs, cache=self.prompt_cache[: self.drafted.split])
        return out

    def _sampler(self, i: int) -> Any:
        return (self.samplers[i] if self.samplers else None) or self.fallback_sampler

    def _processors(self, i: int) -> list[Any]:
        return list((self.logits_processors or [])[i] or ())

    def _judged(self, i: int) -> bool:
        """Whether drafting row i decides by its own distribution (sampled or processed)."""
        return sampled_rule(self._sampler(i)) is not None or bool(self._processors(i))

    def _judge(
        self, i: int, logits: mx.array, inputs: mx.array, n: int, log_q: mx.array | None
    ) -> tuple[mx.array, Verdict]:
        """Drafting row i's log probabilities at its n + 1 positions and its verdict
        (`acceptance.py`): its processors read its context, the columns fed included."""
        processors = self._processors(i)
        context = inputs[:0]
        if processors:  # the pending token joins the row's context now, drafts when kept
            context = self._token_context[i].update_and_fetch(inputs[:1])
        lp = target_logprobs(
            logits[: n + 1],
            processors,
            lambda j: mx.concatenate([context, inputs[1 : j + 1].astype(context.dtype)]),
        )
        return lp, verdict(self._sampler(i), lp, inputs[1 : n + 1], log_q)

    def _verify(
        self, inputs: mx.array, lengths: list[int], log_q: dict[int, mx.array] | None = None
    ) -> list[Any]:
        """Scores `inputs` (pending token, then drafts; row i's first `lengths[i]` are real);
        `log_q`: the log q a sampled row's drafts were drawn from (a draft model's)."""
        logits = self._target(inputs)
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
        # Sampled or processed drafting rows: their own distribution at each position.
        judged = {
            i: self._judge(i, logits[i], inputs[i], n, (log_q or {}).get(i))
            for i, n in enumerate(lengths)
            if i not in sampled and self._judged(i)
        }
        mx.eval(
            inputs,
            greedy,
            logprobs,
            list(sampled.values()),
            list(first.values()),
            [(v.drawn, v.keep) for _, v in judged.values()],
        )
        best: list[list[int]] = greedy.tolist()  # type: ignore[assignment]
        rows: list[list[int]] = inputs.tolist()  # type: ignore[assignment]
        self.policy.verify_steps += 1

        emitted: list[list[tuple[int, mx.array]]] = []
        next_tokens: list[int] = []
        next_logprobs: list[mx.array] = []
        for i, n in enumerate(lengths):
            out = [(rows[i][0], self._next_logprobs[i])]
            if i in sampled:
                next_tokens.append(int(sampled[i].reshape(-1)[0].item()))  # type: ignore[arg-type]
                next_logprobs.append(first[i])
            else:
                draft = rows[i][1 : 1 + n]
                row_lp = logprobs[i]
                if i in judged:
                    row_lp, row_verdict = judged[i]
                    accepted, token = settle(row_verdict, draft)
                    if (rule := sampled_rule(self._sampler(i))) is not None:
                        rule.advance(accepted + 1)
                    if self._processors(i) and accepted:
                        self._token_context[i].update_and_fetch(mx.array(draft[:accepted]))
                else:
                    accepted = 0
                    while accepted < n and draft[accepted] == best[i][accepted]:
                        accepted += 1
                    token = best[i][accepted]
                out.extend((draft[j], row_lp[j]) for j in range(accepted))
                self.policy.verified(self.uids[i], n, accepted)
                next_tokens.append(token)
                next_logprobs.append(row_lp[accepted])
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

        kept = [len(out) for out in emitted]
        self._keep(inputs, kept)
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
                self.forget(uid)
        if len(keep) < len(self.uids):
            self.filter(keep)
        return responses

    def _keep(self, inputs: mx.array, kept: list[int]) -> None:
        """Leaves each row's first `kept` verified positions in the caches, drops the rest.

        The target holds every position of `inputs`; a draft model holds all but the last
        (it never read its own last draft), so when a row kept them all the draft reads it now.
        """
        width = inputs.shape[1]
        if self.headed is not None:
            self._keep_head(inputs, kept)
        elif self.drafted is None:
            _drop(self.prompt_cache, [width - n for n in kept])
        else:
            split = self.drafted.split
            _drop(self.prompt_cache[:split], [width - n for n in kept])
            draft_caches = self.prompt_cache[split:]
            if max(kept) == width:
                self.drafted.draft(inputs[:, width - 1 :], cache=draft_caches)
                _drop(draft_caches, [width - n for n in kept])
            else:
                _drop(draft_caches, [width - 1 - n for n in kept])
        if min(kept) != max(kept):
            self._compact()

    def _keep_head(self, inputs: mx.array, kept: list[int]) -> None:
        """`_keep` with a head: the target's and the head's KV lose the rejected positions
        alike; recurrent states, which cannot, are rolled back to each row's kept positions
        from the states the verify recorded after each position (a VLM's language side,
        `vision/hybrid.py`), else computed again from before the verify over them (one more
        target forward, only when a row rejected); each row keeps the target's features at
        its last kept position."""
        headed = self.headed
        assert headed is not None and self._verified is not None
        width = inputs.shape[1]
        plain = [c for c in self.prompt_cache[:-1] if not isinstance(c, ArraysCache)]
        if self._recorded is not None and min(kept) < width:
            roll_back(self._recorded, kept)
        elif self._before and min(kept) < width:
            for c in plain[: len(plain) - len(headed.head.layers)]:
                c.trim(width)
            for c, (arrays, padding, _) in self._before:
                c.state = (arrays, padding, mx.array(kept))
            # From where the verify started (the rows' tokens now hold what they kept).
            before = [t[: len(t) - n] for t, n in zip(self.tokens, kept, strict=True)]
            feed(headed, self.uids, before)
            headed.forward(inputs, self.prompt_cache)
            for c, (_, padding, lengths) in self._before:
                c.left_padding, c.lengths = padding, lengths
        _drop(plain, [width - n for n in kept])
        headed.keep(self.prompt_cache, self._verified, kept)
        self._before, self._verified, self._recorded = [], None, None

    def _compact(self) -> None:
        # The padding of the KV caches (a recurrent state has none).
        first = next(c for c in self.prompt_cache if not isinstance(c, ArraysCache))
        padding = first.left_padding.tolist()
        if max(padding) - min(padding) <= max(64, first.size() // 4):
            return
        self.prompt_cache = [
            type(c).merge([c.extract(i) for i in range(len(self.uids))]) for c in self.prompt_cache
        ]


def _drop(caches: list[Any], rejected: list[int]) -> None:
    """Removes each row's trailing `rejected` positions from `caches`.

    The common part is trimmed; the rest becomes left padding (rolled to the front, as
    mlx-lm finalizes a right-padded prefill).
    """
    common = min(rejected)
    rest = [r - common for r in rejected]
    for c in caches:
        if common:
            c.trim(common)
        if any(rest):
            c.prepare(right_padding=rest)
            c.finalize()
