"""A compiled grammar as an mlx-lm logits processor: tokens it forbids get -inf.

The processor runs on the MLX thread inside the batch (service/engine/batch/grammar_batch.py fills
every constrained sequence's mask in one step); the grammar itself is compiled at create time
(service/text/grammars.py) into the matcher it is given.
"""

from __future__ import annotations

import llguidance
import mlx.core as mx
import numpy as np


class GrammarProcessor:
    """An mlx-lm logits processor: `(tokens, logits) -> logits` with forbidden tokens at -inf."""

    def __init__(self, matcher: llguidance.LLMatcher, vocab_size: int) -> None:
        self._matcher = matcher
        self._vocab_size = vocab_size
        self._started = False

    @property
    def matcher(self) -> llguidance.LLMatcher:
        """The grammar state (a batched decode step fills its mask with the others')."""
        return self._matcher

    @property
    def vocab_size(self) -> int:
        """The mask's width: the model's vocabulary."""
        return self._vocab_size

    def advance(self, last: int) -> None:
        """Feeds the context's last token: the one sampled last step (the prompt's, at first)."""
        if self._started:
            self._matcher.consume_token(last)  # type: ignore[arg-type]
        self._started = True

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        # The mask needs the token sampled last step, this step's forward pass does not: queue
        # the context, then the forward pass, and read the context as memory (np.asarray waits
        # for it alone; a new MLX op would wait behind the forward pass), so the forward pass
        # runs while the mask is computed.
        mx.async_eval(tokens)
        mx.async_eval(logits)
        self.advance(int(np.asarray(tokens).reshape(-1)[-1]))
        words = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        allowed = np.unpackbits(words, bitorder="little")[: logits.shape[-1]].astype(bool)
        return mx.where(mx.array(allowed), logits, -mx.inf)
