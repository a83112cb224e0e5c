"""mlx-lm's BatchGenerator behind the scheduler protocol (`--engine batch`).

Our patches ride in it: its prefill pieces never end on one token (`prefill_batch.py`), and its
decode batch is ours, constrained by grammars in one pass (`grammar_batch.py`) or speculating
(`speculative.py`, which is a grammar batch too). The adapter maps the worker's uids to the
generator's, turns its responses into `Token`s, and takes a prompt's entry where a segment of
its prefill ended and where its whole prompt is in (`prompt_ends`). Everything here may read
mlx-lm's private names; nothing outside `batch/` may (`mlx_lm_compat.py` lists them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from mlx_responses.service.engine.batch.grammar_batch import GrammarGenerationBatch
from mlx_responses.service.engine.batch.mlx_lm_compat import BatchGenerator
from mlx_responses.service.engine.batch.prefill_batch import PiecewisePromptBatch
from mlx_responses.service.engine.batch.quantized_cache import mergeable
from mlx_responses.service.engine.batch.speculative import SpeculativeGenerationBatch
from mlx_responses.service.engine.draft_model import DraftedModel
from mlx_responses.service.engine.heads import HeadedModel
from mlx_responses.service.engine.scheduler import (
    Admission,
    Alone,
    PromptEnd,
    SpeculationCounts,
    StepResult,
    Token,
)


class BatchScheduler:
    """A `scheduler.Scheduler` over mlx-lm's BatchGenerator."""

    # A rejected draft is trimmed off mlx-lm's batched caches: plain ones only (speculative.py).
    rewinds_any_window = False

    def __init__(
        self,
        model: Any,
        *,
        stop_tokens: Collection[int],
        completion_batch_size: int,
        prefill_batch_size: int,
        prefill_step_size: int,
        speculate: bool = False,
        num_draft_tokens: int = 4,
    ) -> None:
        """`model`: the served model, or a `DraftedModel` pair (speculation with a draft)."""
        generator = BatchGenerator(
            model,
            stop_tokens=[[t] for t in sorted(stop_tokens)],
            completion_batch_size=completion_batch_size,
            prefill_batch_size=prefill_batch_size,
            prefill_step_size=prefill_step_size,
        )
        generator._prompt_batch = PiecewisePromptBatch.empty(
            model, generator.sampler, prefill_step_size=prefill_step_size
        )
        # NOTE: swaps in our decode batch before anything joins it; prefill stays mlx-lm's.
        self._spec: SpeculativeGenerationBatch | None = None
        if speculate:
            batch = SpeculativeGenerationBatch.empty(model, generator.sampler)
            batch.num_draft = num_draft_tokens
            if isinstance(model, DraftedModel):
                batch.drafted = model
            elif isinstance(model, HeadedModel):
                batch.use_head(model)
            generator._generation_batch = batch
            self._spec = batch
        else:
            generator._generation_batch = GrammarGenerationBatch.empty(model, generator.sampler)
        self._generator = generator
        self.speculates = speculate
        # A model that keeps rows' embeddings and positions (`feed.py`: a hybrid VLM's).
        self._rows = model if hasattr(model, "enter") else None
        self.takes_embeddings = self._rows is not None
        self.prompt_ends = False
        self._theirs: dict[int, int] = {}  # our uid -> the generator's
        self._ours: dict[int, int] = {}  # the generator's uid -> ours

    # --- settings --------------------------------------------------------------------------
    @property
    def prefill_step_size(self) -> int:
        return int(self._generator.prefill_step_size)

    @prefill_step_size.setter
    def prefill_step_size(self, tokens: int) -> None:
        self._generator.prefill_step_size = tokens

    @property
    def stream(self) -> Any:
        return self._generator.stream

    @property
    def entry_room(self) -> Callable[[int], bool]:
        """Asked before a finishing sequence's KV is copied out as its prompt-cache entry
        (the decode batch asks, `GrammarGenerationBatch.entry_room`)."""
        batch: GrammarGenerationBatch = self._generator._generation_batch
        return batch.entry_room

    @entry_room.setter
    def entry_room(self, room: Callable[[int], bool]) -> None:
        self._generator._generation_batch.entry_room = room

    # --- the Scheduler protocol ------------------------------------------------------------
    def admit(self, admission: Admission) -> None:
        if self._rows is None and (
            admission.embeddings is not None or admission.positions is not None
        ):
            raise ValueError("mlx-lm's batch takes token ids only")
        if admission.deepstack is not None:
            raise ValueError("mlx-lm's batch takes no deepstack features")
        cache = admission.cache
        (theirs,) = self._generator.insert_segments(
            [admission.segments],
            max_tokens=[admission.max_tokens],
            # None: a fresh one.
            caches=[None if cache is None else mergeable(cache)],  # type: ignore[list-item]
            all_tokens=[admission.cached],
            samplers=[admission.sampler],
            logits_processors=[admission.logits_processors],
        )
        self._theirs[admission.uid] = theirs
        self._ours[theirs] = admission.uid
        if self._rows is not None:
            base = len(admission.cached)
            self._rows.enter(theirs, base, admission.embeddings, admission.positions)
        if self._spec is not None and admission.speculate:
            # A grammar's sequence decodes normally in the same batch step (its matcher keeps
            # state per token); greedy and sampled ones, penalties too, may draft.
            self._spec.policy.admit(theirs, admission.sampler)

    def _forget(self, uid: int) -> int | None:
        theirs = self._theirs.pop(uid, None)
        if theirs is not None:
            self._ours.pop(theirs, None)
            if self._rows is not None:
                self._rows.leave(theirs)
            if self._spec is not None:
                self._spec.forget(theirs)
        return theirs

    def drop(self, uids: Sequence[int]) -> None:
        gone = [t for t in (self._forget(uid) for uid in uids) if t is not None]
        if gone:
            self._generator.remove(gone)

    def step(self) -> StepResult:
        generator = self._generator
        before = generator._counters.prompt_tokens
        prompted, responses = generator.next()
        ends: list[PromptEnd] = []
        if self.prompt_ends:
            # The entries of the prompts whose segment ended in this step, and of those that
            # began decoding: their whole prompt is in (fed last when they joined the decode
            # batch), their first token sampled and not yet fed.
            ended = [r.uid for r in prompted if r.end_of_segment]
            if ended:
                for theirs, (cache, tokens) in generator.extract_cache(ended).items():
                    if (uid := self._ours.get(theirs)) is not None:
                        ends.append(PromptEnd(uid, cache, list(tokens)))
        out: list[Token] = []
        unread = self._spec.policy.drain() if self._spec is not None else {}
        for r in responses:
            uid = self._ours.get(r.uid)
            if uid is None:
                continue
            if r.finish_reason is not None:
                self._forget(uid)
            token = Token(uid, r.token, r.logprobs, r.finish_reason, r.prompt_cache, r.all_tokens)
            if (counts := unread.pop(r.uid, None)) is not None:  # its first token of the step
                token.drafted, token.accepted = counts
            out.append(token)
        return StepResult(ends, out, generator._counters.prompt_tokens - before)

    def extract(self, uids: Sequence[int]) -> dict[int, tuple[list[Any], list[int]]]:
        theirs = [self._theirs[uid] for uid in uids if uid in self._theirs]
        return {
            self._ours[t]: (cache, list(tokens))
            for t, (cache, tokens) in self._generator.extract_cache(theirs).items()
        }

    def take_alone(self) -> Alone | None:
        """The batch down to one unconstrained sequence with nobody waiting: that sequence,
        removed from the batch (its cache extracted, its sampled token not yet fed)."""
        generator = self._generator
        batch = generator._generation_batch
        if (
            len(batch) != 1
            or self.waiting
            or batch.logits_processors[0]
            or batch.uids[0] not in self._ours
        ):
            return None
        theirs = batch.uids[0]
        uid = self._ours[theirs]
        alone = Alone(
            uid,
            batch.extract_cache(0),
            list(batch.tokens[0]),
            (batch._next_tokens, batch._next_logprobs[0]),
            batch.samplers[0],
            batch.max_tokens[0] - batch._num_tokens[0],
        )
        self._forget(uid)
        generator.remove([theirs])
        return alone

    @property
    def nbytes(self) -> int:
        return int(self._generator.prompt_cache_nbytes)

    @property
    def waiting(self) -> int:
        """Prompts the batch holds that are not decoding yet (being prefilled, or not started)."""
        generator = self._generator
        return len(generator._prompt_batch) + len(generator._unprocessed_sequences)

    @property
    def decoding(self) -> int:
        return len(self._generator._generation_batch)

    @property
    def speculation(self) -> SpeculationCounts | None:
        spec = self._spec
        if spec is None:
            return None
        return SpeculationCounts(spec.drafted_tokens, spec.accepted_tokens, spec.verify_steps)

    def close(self) -> None:
        self._generator.close()
        if self._rows is not None:
            for theirs in self._theirs.values():
                self._rows.leave(theirs)
        self._theirs.clear()
        self._ours.clear()
