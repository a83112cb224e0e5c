"""One grammar mask per decode step: every constrained sequence's row filled together.

mlx-lm calls each sequence's logits processor in turn, and a grammar processor must wait for
its own last token before it can compute a mask: one wait per constrained sequence and step.
Here the step reads the batch's tokens once, llguidance fills all rows of one bitmask in
parallel, and one `mx.where` applies it to the batch logits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import llguidance
import mlx.core as mx
import numpy as np
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask_par
from mlx_responses.service.engine.batch.feed import feed
from mlx_responses.service.engine.batch.mlx_lm_compat import GenerationBatch
from mlx_responses.service.engine.structured import GrammarProcessor


@functools.cache
def _llexecutor() -> llguidance.LLExecutor:
    return llguidance.LLExecutor()


def grammar_of(processors: list[Any] | None) -> GrammarProcessor | None:
    """The sequence's grammar when it is its last processor (penalties shift logits first)."""
    if processors and isinstance(processors[-1], GrammarProcessor):
        return processors[-1]
    return None


def batch_mask(grammars: list[GrammarProcessor | None], tokens: list[int]) -> np.ndarray:
    """Feeds each grammar its last token; the allowed tokens, `[batch, vocab]` (all for None)."""
    vocab = next(g.vocab_size for g in grammars if g is not None)
    bitmask = allocate_token_bitmask(len(grammars), vocab)  # every bit set: all allowed
    rows = []
    for i, grammar in enumerate(grammars):
        if grammar is not None:
            grammar.advance(tokens[i])
            rows.append((grammar.matcher, i))
    fill_next_token_bitmask_par(_llexecutor(), rows, bitmask)
    allowed = np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little")
    return allowed[:, :vocab].astype(bool)


class GrammarGenerationBatch(GenerationBatch):
    """mlx-lm's GenerationBatch whose decode step masks all constrained sequences at once.

    NOTE: `_step` restates the pinned mlx-lm's step (forward, processors, sampling, async
    hand-off) with the grammar processors taken out of the per-sequence loop; a step with no
    grammar in the batch is the library's own. A new sequence's first step still runs in
    the library's batch (its processor's own call), before it joins this one.
    """

    # Asked before a finishing row's KV is copied out as its prompt-cache entry (its tokens):
    # whether the memory budget has room for the copy beside the batch's cache, which holds
    # the row until the step's filter (`KVStore.entry_room`); no: its response carries none.
    entry_room: Callable[[int], bool] = staticmethod(lambda tokens: True)
    _finishing = False  # inside a decode step: extract_cache copies finishing rows

    def next(self) -> list[Any]:
        self._finishing = True
        try:
            return self._decode()
        finally:
            self._finishing = False

    def _decode(self) -> list[Any]:
        """One decode step (mlx-lm's), its finishing rows' entries gated by `entry_room`."""
        return super().next()  # type: ignore[no-any-return]

    def extract_cache(self, idx: int) -> list[Any]:
        if self._finishing and not self.entry_room(len(self.tokens[idx])):
            return None  # type: ignore[return-value]  # mlx-lm's Response takes None
        return self._copy(idx)

    def _copy(self, idx: int) -> list[Any]:
        """Row `idx`'s caches, copied out of the batch's."""
        return super().extract_cache(idx)  # type: ignore[no-any-return]

    def _step(self) -> tuple[list[int], list[mx.array]]:
        feed(self.model, self.uids, self.tokens)
        processors: list[Any] = self.logits_processors or [None] * len(self.uids)
        grammars = [grammar_of(p) for p in processors]
        if not any(grammars) or len({g.vocab_size for g in grammars if g is not None}) > 1:
            return super()._step()  # type: ignore[no-any-return]
        self._current_tokens = self._next_tokens  # type: ignore[assignment]
        self._current_logprobs = self._next_logprobs
        inputs: Any = self._current_tokens
        logits = self.model(inputs[:, None], cache=self.prompt_cache)[:, -1, :]
        # Queue the forward pass, then wait for the tokens alone (sampled last step): the
        # masks are computed while the forward pass runs.
        mx.async_eval(logits)
        current: list[int] = inputs.tolist()
        allowed = batch_mask(grammars, current)

        token_context = []
        rest = [
            p[:-1] if g is not None else (p or [])
            for p, g in zip(processors, grammars, strict=True)
        ]
        if any(rest):
            rows = []
            for e, others in enumerate(rest):
                row = logits[e : e + 1]
                if others:
                    context = self._token_context[e].update_and_fetch(inputs[e : e + 1])
                    token_context.append(context)
                    for processor in others:
                        row = processor(context, row)
                rows.append(row)
            logits = mx.concatenate(rows, axis=0)
        logits = mx.where(mx.array(allowed[:, : logits.shape[-1]]), logits, -mx.inf)

        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        samplers = [self.fallback_sampler if s is None else s for s in (self.samplers or [])]
        if not samplers or all(s is samplers[0] for s in samplers):
            sampled = (samplers[0] if samplers else self.fallback_sampler)(logprobs)
        else:
            sampled = mx.concatenate(
                [s(logprobs[e : e + 1]) for e, s in enumerate(samplers)], axis=0
            )
        self._next_tokens = sampled
        self._next_logprobs = list(logprobs)
        mx.async_eval(self._next_tokens, self._next_logprobs, token_context)
        mx.eval(self._current_logprobs)
        for tokens, token in zip(self.tokens, current, strict=True):
            tokens.append(token)
        return current, self._current_logprobs
