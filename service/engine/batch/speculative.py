"""Speculative decoding inside the batch: drafts of greedy sequences verified in one forward.

Drafts come from the context (prompt lookup: the tokens that followed an earlier occurrence of
the last n-gram) or from a small draft model run over the whole batch. The target model scores
every sequence's pending token and its drafts in one pass, and the longest prefix of drafts
that greedy decoding would have produced is accepted. Output is the greedy output (up to float
rounding of a wider forward), only sooner.

Whether a step drafts, and how far, is decided per step for the whole batch: a verify widens
every row, so it runs only when the drafts' expected accepted tokens (from each sequence's own
acceptance record) beat what the wider forward costs. A draft model reads nothing on steps
that do not draft: its cache lags the target's and catches up when it is needed.
"""

from __future__ import annotations

from typing import Any, cast

import mlx.core as mx
from mlx_responses.service.engine import speculation
from mlx_responses.service.engine.batch.grammar_batch import GrammarGenerationBatch
from mlx_responses.service.engine.batch.mlx_lm_compat import BatchKVCache
from mlx_responses.service.engine.batch.quantized_cache import BatchQuantizedKVCache
from mlx_responses.service.engine.draft_model import DraftedModel
from mlx_responses.service.engine.speculation import DraftRecord, NgramDrafter


class SpeculativeGenerationBatch(GrammarGenerationBatch):
    """A GenerationBatch whose decode step verifies drafts of greedy sequences.

    With `drafted` set (its model is then a DraftedModel) drafts come from the draft model,
    else from n-gram lookup. NOTE: it works on GenerationBatch's state (pending tokens, caches,
    matchers) of the pinned mlx-lm; sequences with logits processors or a non-greedy sampler
    are never drafted for, and a step without drafts is the library's own step (with a draft
    model, a step of the target alone).
    """

    num_draft: int = 0
    _drafted: DraftedModel | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Inputs the target read alone, one [batch, 1] per step: the draft's cache lags by as
        # many positions in every row (each such step adds one token to each row).
        self._missed: list[mx.array] = []
        self.drafters: dict[int, DraftRecord] = {}
        self.eligible: set[int] = set()
        self.drafted_tokens = 0
        self.accepted_tokens = 0
        self.verify_steps = 0
        super().__init__(*args, **kwargs)

    @property
    def drafted(self) -> DraftedModel | None:
        """The target paired with its draft model (None: n-gram drafts)."""
        return self._drafted

    @drafted.setter
    def drafted(self, pair: DraftedModel | None) -> None:
        self._drafted = pair
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

    def _catch_up(self) -> None:
        """The draft reads what it missed, in one forward (before its cache is used or moved)."""
        if self._missed and self.drafted is not None:
            missed, self._missed = self._missed, []
            self.drafted.draft_reads(mx.concatenate(missed, axis=1), self.prompt_cache)

    def extend(self, batch: Any) -> None:
        self._catch_up()  # the new rows' draft caches are up to date
        super().extend(batch)

    def extract_cache(self, idx: int) -> list[Any]:
        self._catch_up()  # a prompt-cache entry holds both caches at the same position
        caches: list[Any] = super().extract_cache(idx)
        return caches

    def filter(self, keep: list[int]) -> None:
        super().filter(keep)
        if self._missed:
            missed = mx.concatenate(self._missed, axis=1)
            self._missed = [missed[mx.array(keep)]] if keep else []

    def forget(self, uid: int) -> None:
        """Drops a sequence's drafting state (it finished or was removed)."""
        self.eligible.discard(uid)
        self.drafters.pop(uid, None)

    def _record(self, uid: int) -> DraftRecord:
        record = self.drafters.get(uid)
        if record is None:
            record = NgramDrafter() if self.drafted is None else DraftRecord()
            self.drafters[uid] = record
        return record

    def _room(self, i: int) -> int:
        return min(self.num_draft, self.max_tokens[i] - self._num_tokens[i] - 1)

    def next(self) -> list[Any]:
        if not self.uids or self.num_draft <= 0 or not self.eligible.intersection(self.uids):
            return super().next()
        if not all(isinstance(c, BatchKVCache | BatchQuantizedKVCache) for c in self.prompt_cache):
            return super().next()
        records = {i: self._record(uid) for i, uid in enumerate(self.uids) if uid in self.eligible}
        responses = self._ngram(records) if self.drafted is None else self._draft(records)
        if responses is None:
            for record in records.values():
                record.rested()
            return super().next()
        return responses

    def _ngram(self, records: dict[int, DraftRecord]) -> list[Any] | None:
        ready: dict[int, NgramDrafter] = {}
        for i, record in records.items():
            assert isinstance(record, NgramDrafter)
            record.sync(self.tokens[i])
            if record.ready() and self._room(i) > 0:
                ready[i] = record
        batch = len(self.uids)
        if not speculation.best_width([(d.rate, self._room(i)) for i, d in ready.items()], batch):
            return None  # not worth it even if every lookup drafts: no wait for the tokens
        mx.eval(self._next_tokens)
        pending: list[int] = self._next_tokens.tolist()  # type: ignore[assignment]
        drafts: dict[int, list[int]] = {}
        for i, drafter in ready.items():
            drafter.sync(self.tokens[i], pending[i])
            drafts[i] = drafter.draft(self._room(i))
        width = speculation.best_width(
            [(ready[i].rate, len(d)) for i, d in drafts.items() if d], batch
        )
        if not width:
            return None
        lengths = [min(width, len(drafts.get(i, []))) for i in range(batch)]
        rows = [
            [pending[i], *drafts.get(i, [])[:n]] + [0] * (width - n) for i, n in enumerate(lengths)
        ]
        return self._verify(mx.array(rows, dtype=mx.uint32), lengths)

    def _draft(self, records: dict[int, DraftRecord]) -> list[Any] | None:
        assert self.drafted is not None
        room = {i: self._room(i) for i in records}
        candidates = [(r.rate, room[i]) for i, r in records.items() if room[i] > 0]
        width = speculation.best_width(candidates, len(self.uids), self.drafted.cost_ratio())
        if not width:
            return None
        # The draft runs greedily over the whole batch, from the pending tokens (not waited
        # for), its first forward reading what it missed too: one graph with the verify,
        # evaluated once.
        token = self._next_tokens[:, None]
        columns = [token]
        missed, self._missed = self._missed, []
        inputs = mx.concatenate([*missed, token], axis=1)
        for _ in range(width):
            logits = self.drafted.draft_logits(inputs, self.prompt_cache)
            inputs = mx.argmax(logits, axis=-1).astype(mx.uint32)[:, None]
            columns.append(inputs)
        lengths = [min(width, room.get(i, 0)) for i in range(len(self.uids))]
        return self._verify(mx.concatenate(columns, axis=1), lengths)

    def _target(self, inputs: mx.array) -> mx.array:
        if self.drafted is None:
            out: mx.array = self.model(inputs, cache=self.prompt_cache)
            return out
        out = self.drafted.target(inputs, cache=self.prompt_cache[: self.drafted.split])
        return out

    def _verify(self, inputs: mx.array, lengths: list[int]) -> list[Any]:
        """Scores `inputs` (pending token, then drafts; row i's first `lengths[i]` are real)."""
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
        mx.eval(inputs, greedy, logprobs, list(sampled.values()), list(first.values()))
        best: list[list[int]] = greedy.tolist()  # type: ignore[assignment]
        rows: list[list[int]] = inputs.tolist()  # type: ignore[assignment]
        self.verify_steps += 1

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
                accepted = 0
                while accepted < n and draft[accepted] == best[i][accepted]:
                    out.append((draft[accepted], logprobs[i, accepted]))
                    accepted += 1
                self.drafted_tokens += n
                self.accepted_tokens += accepted
                record = self.drafters.get(self.uids[i])
                if record is not None:
                    if n:
                        record.accepted(n, accepted)
                    else:
                        record.rested()
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
        if self.drafted is None:
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

    def _compact(self) -> None:
        first = self.prompt_cache[0]
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
