"""The solo path behind the scheduler protocol: one lone sequence decoded alone, in front of
the scheduler that batches (`SoloScheduler(behind=...)`).

A sequence admitted `alone` (no other arrived with it) while nothing else is held, without
logits processors, decodes here (`sequence.py`: a plain KV cache, the next forward queued
before the host reads a token). When a second sequence is admitted, the lone one is handed
over first: its token sampled and not yet sent leaves with the next step's tokens, and the
scheduler behind goes on from its cache with that token as its prompt. When the scheduler
behind is down to one unconstrained sequence with nobody waiting, it hands it back
(`take_alone`), checked before each step. With n-gram speculation (`drafts`), the lone sequence
drafts on its own cache when its context repeats (`drafting.py`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Sequence
from typing import Any

from mlx_responses.service.engine.requests import EngineStats
from mlx_responses.service.engine.scheduler import (
    Admission,
    Alone,
    PromptEnd,
    Scheduler,
    SpeculationCounts,
    StepResult,
    Token,
    segments,
)
from mlx_responses.service.engine.solo.drafting import SoloDrafts
from mlx_responses.service.engine.solo.sequence import SoloSequence


class SoloScheduler:
    """A `scheduler.Scheduler` that decodes a lone sequence itself and the rest `behind`."""

    takes_embeddings = False

    def __init__(
        self,
        behind: Scheduler,
        model: Any,
        *,
        stop_tokens: Collection[int],
        prefill_step_size: int,
        new_cache: Callable[[], list[Any]],
        stats: EngineStats,
        drafts: SoloDrafts | None = None,
    ) -> None:
        """`new_cache`: an empty cache for a sequence that starts without an entry (quantized
        under --kv-bits, as the one behind makes them); `stats` counts solo sequences and
        hand-overs; `drafts`: n-gram drafting for lone sequences that may speculate."""
        self.behind = behind
        self.model = model
        self.stop_tokens = stop_tokens
        self.solo_step_size = prefill_step_size
        self.new_cache = new_cache
        self.stats = stats
        self.rewinds_any_window = behind.rewinds_any_window
        self.speculates = behind.speculates
        self._solo: SoloSequence | None = None
        self._early: list[Token] = []  # a handed-over sequence's last token, to send
        self.drafts = drafts
        self._drafting = False  # whether the solo sequence may draft (`Admission.speculate`)

    # --- settings: those of the scheduler behind ------------------------------------------
    @property
    def prefill_step_size(self) -> int:
        return self.behind.prefill_step_size

    @prefill_step_size.setter
    def prefill_step_size(self, tokens: int) -> None:
        self.behind.prefill_step_size = tokens

    @property
    def prompt_ends(self) -> bool:
        return self.behind.prompt_ends

    @prompt_ends.setter
    def prompt_ends(self, on: bool) -> None:
        self.behind.prompt_ends = on

    @property
    def stream(self) -> Any:
        return self.behind.stream

    # --- the Scheduler protocol ------------------------------------------------------------
    def admit(self, admission: Admission) -> None:
        if self._fits(admission):
            self._start(admission)
            return
        if self._solo is not None:
            self._hand_over()
        self.behind.admit(admission)

    def _fits(self, admission: Admission) -> bool:
        """Whether it may decode alone: nothing else held, nothing the solo path lacks (an
        empty prompt goes behind, which refuses it)."""
        return (
            admission.alone
            and self._solo is None
            and not self.behind.waiting
            and not self.behind.decoding
            and bool(admission.prompt)
            and not admission.logits_processors
            and admission.embeddings is None
        )

    def _start(self, admission: Admission) -> None:
        self._solo = SoloSequence.admitted(
            admission,
            self.model,
            self.behind.stream,
            new_cache=self.new_cache,
            stop_tokens=self.stop_tokens,
            prefill_step_size=self.solo_step_size,
            keeps_prompt=self.prompt_ends,
        )
        self._drafting = admission.speculate
        self.stats.solo_sequences += 1

    def _hand_over(self) -> None:
        """Moves the solo sequence behind: its token in flight leaves with the next step's,
        and is fed there."""
        solo, self._solo = self._solo, None
        assert solo is not None
        self._forget(solo.uid)
        handover = solo.handover()
        if handover.emitted is not None:
            self._early.append(handover.emitted)
            if handover.emitted.finish_reason is not None:  # it finished on that token
                return
        self.stats.handovers += 1
        # A prefill handed over before its checkpoints still leaves entries there.
        splits = [point - len(handover.all_tokens) for point in solo.checkpoints]
        self.behind.admit(
            Admission(
                uid=solo.uid,
                segments=segments(handover.prompt, splits),
                max_tokens=handover.max_tokens,
                sampler=handover.sampler,
                cache=handover.cache,
                cached=handover.all_tokens,
                speculate=self.speculates,
            )
        )

    def _resume(self) -> None:
        """The scheduler behind down to one unconstrained sequence, nobody waiting: it decodes
        alone from here."""
        alone: Alone | None = self.behind.take_alone()
        if alone is None:
            return
        self._solo = SoloSequence.resumed(
            self.model,
            self.behind.stream,
            uid=alone.uid,
            cache=alone.cache,
            tokens=alone.tokens,
            pending=alone.pending,
            sampler=alone.sampler,
            max_tokens=alone.max_tokens,
            stop_tokens=self.stop_tokens,
            prefill_step_size=self.solo_step_size,
        )
        self._drafting = True  # handed back unconstrained (`take_alone`)
        self.stats.solo_sequences += 1

    def _forget(self, uid: int) -> None:
        if self.drafts is not None:
            self.drafts.forget(uid)

    def step(self) -> StepResult:
        if self._solo is None and not self._early:
            self._resume()
        early, self._early = self._early, []
        solo = self._solo
        if solo is None:
            result = self.behind.step()
            result.tokens = early + result.tokens
            return result
        if self.drafts is not None and self._drafting and solo.decoding:
            drafted = self.drafts.step(solo)
            if drafted is not None:
                if drafted[-1].finish_reason is not None:
                    self._solo = None
                return StepResult([], [*early, *drafted])
        token = solo.step()
        if token is None:
            ends = []
            if self.prompt_ends and solo.at_checkpoint:
                # The solo cache goes on decoding: the entry is a copy of it.
                ends.append(PromptEnd(solo.uid, copy.deepcopy(solo.cache), list(solo.tokens)))
            return StepResult(ends, early)
        ends = []
        if solo.prompt_in is not None:  # the whole prompt is in (taken with `prompt_ends`)
            ends.append(PromptEnd(solo.uid, *solo.prompt_in))
            solo.prompt_in = None
        if token.finish_reason is not None:
            self._solo = None
            self._forget(solo.uid)
        return StepResult(ends, [*early, token])

    def drop(self, uids: Sequence[int]) -> None:
        if self._solo is not None and self._solo.uid in uids:
            self._forget(self._solo.uid)
            self._solo = None
        self._early = [t for t in self._early if t.uid not in uids]
        self.behind.drop(uids)

    def extract(self, uids: Sequence[int]) -> dict[int, tuple[list[Any], list[int]]]:
        out = self.behind.extract(uids)
        solo = self._solo
        if solo is not None and solo.uid in uids and solo.tokens:
            out[solo.uid] = (copy.deepcopy(solo.cache), list(solo.tokens))
        return out

    def take_alone(self) -> Alone | None:
        return None  # the front: it keeps a lone sequence itself

    @property
    def nbytes(self) -> int:
        return self.behind.nbytes + (self._solo.nbytes if self._solo is not None else 0)

    @property
    def waiting(self) -> int:
        solo = self._solo
        return self.behind.waiting + (1 if solo is not None and not solo.decoding else 0)

    @property
    def decoding(self) -> int:
        solo = self._solo
        return self.behind.decoding + (1 if solo is not None and solo.decoding else 0)

    @property
    def speculation(self) -> SpeculationCounts | None:
        behind = self.behind.speculation
        if self.drafts is None or behind is None:
            return behind
        solo = self.drafts.policy
        return SpeculationCounts(
            behind.drafted_tokens + solo.drafted_tokens,
            behind.accepted_tokens + solo.accepted_tokens,
            behind.verify_steps + solo.verify_steps,
        )

    def close(self) -> None:
        self._solo = None
        self._early = []
        self.behind.close()
