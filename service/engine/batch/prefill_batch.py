"""mlx-lm's prompt batch, cutting each chunk into pieces none of which is one token.

mlx-lm's `PromptProcessingBatch.prompt` runs a chunk through the model in pieces of its
`prefill_step_size`. While sequences decode, the worker hands out chunks sized by its step
budget (`EngineWorker._step`), wider than that piece. Prompts of unequal chunk widths prefill
together under right padding, and if the widest chunk leaves a last piece of one token,
`BatchRotatingKVCache` refuses that update ("finalize() should be called before decoding") and
the step fails every request in it. Here a chunk is cut into pieces of the step unless that
leaves a one-token piece; then into the largest smaller pieces that leave none.
"""

from __future__ import annotations

from typing import Any

from mlx_responses.service.engine.batch.feed import feed
from mlx_responses.service.engine.batch.mlx_lm_compat import PromptProcessingBatch


def piece_size(width: int, step: int) -> int:
    """Pieces for a chunk `width` tokens wide: at most `step`, and none of one token (`width`
    itself when no smaller size avoids it, as for a step of 1)."""
    return next((p for p in range(min(step, width), 1, -1) if width % p != 1), width)


class PiecewisePromptBatch(PromptProcessingBatch):  # type: ignore[misc]
    """mlx-lm's prompt batch with `piece_size` pieces; a model that takes per-row inputs is
    told its rows before each chunk and each sequence's first step (`feed.py`)."""

    def prompt(self, tokens: list[list[int]]) -> None:
        feed(self.model, self.uids, self.tokens)
        step = self.prefill_step_size
        self.prefill_step_size = piece_size(max((len(t) for t in tokens), default=0), step)
        try:
            super().prompt(tokens)
        finally:
            self.prefill_step_size = step

    def generate(self, tokens: list[list[int]]) -> Any:
        if any(len(t) > 1 for t in tokens):
            self.prompt([t[:-1] for t in tokens])
        feed(self.model, self.uids, self.tokens)
        return super().generate([t[-1:] for t in tokens])
