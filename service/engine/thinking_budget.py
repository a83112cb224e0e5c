"""A reasoning budget as an mlx-lm logits processor: once spent, the think-end token is forced."""

from __future__ import annotations

import mlx.core as mx
import numpy as np


class ThinkingBudget:
    """Counts the tokens generated inside a reasoning block; at `budget` it forces the block shut.

    A new block (the think-start token) gets a fresh budget; outside blocks it changes nothing.
    """

    def __init__(self, budget: int, start_id: int, end_id: int, *, inside: bool) -> None:
        self.budget = budget
        self.start_id = start_id
        self.end_id = end_id
        self.inside = inside
        self.spent = 0
        self._started = False

    def advance(self, last: int) -> None:
        """Feeds the token sampled last step (the prompt's own last token at first: skipped)."""
        if not self._started:
            self._started = True
            return
        if last == self.start_id:
            self.inside, self.spent = True, 0
        elif last == self.end_id:
            self.inside = False
        elif self.inside:
            self.spent += 1

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        self.advance(int(np.asarray(tokens).reshape(-1)[-1]))
        if not (self.inside and self.spent >= self.budget):
            return logits
        only_end = mx.arange(logits.shape[-1]) == self.end_id
        return mx.where(only_end, logits, -mx.inf)


def single_token(tokenizer: object, text: str | None) -> int | None:
    """The id of `text` when it is exactly one token of `tokenizer`, else None."""
    if not text:
        return None
    ids = tokenizer.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
    return int(ids[0]) if len(ids) == 1 else None


def thinking_budget(tokenizer: object, budget: int, *, inside: bool) -> ThinkingBudget | None:
    """The budget processor for a model whose think markers are single tokens, else None."""
    start = single_token(tokenizer, getattr(tokenizer, "think_start", None))
    end = single_token(tokenizer, getattr(tokenizer, "think_end", None))
    if start is None or end is None:
        return None
    return ThinkingBudget(budget, start, end, inside=inside)
