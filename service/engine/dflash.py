"""A DFlash drafter folder (mlx-vlm's format: a block-diffusion drafter, loaded by mlx-vlm's
`load_drafter` into its `DFlashDraftModel`) drafting for the served model.

The head keeps, as the keys and values of its layers, the target's hidden states (several
layers' outputs, concatenated, `fc` bringing them to its width) at every position the target
has read, one entry per position: it reads them as the target runs. A draft is one forward of
a block, the pending token then mask tokens, whose positions attend over those entries and
each other: each mask position's logits are a draft. `heads.py` says how a head rides along
(its entries are the target's positions, one each: none lags).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.acceptance import next_drafts
from mlx_responses.service.engine.eagle3 import captured
from mlx_responses.service.engine.heads import HeadedModel
from mlx_responses.service.engine.seeded_sampler import RuleSampler


class DFlashModel(HeadedModel):
    """The target with a DFlash head (mlx-vlm's class, bound to the target's embeddings and
    output head)."""

    kind = "dflash"

    def __init__(self, target: Any, head: Any) -> None:
        self._ids = sorted(head.config.target_layer_ids)
        super().__init__(target, head, len(self._ids) * int(head.config.hidden_size))
        self._outputs: dict[int, mx.array] = {}
        for i in set(self._ids):
            captured(target.layers[i], lambda out, i=i: self._outputs.__setitem__(i, out))
        self.block = int(head.config.runtime_block_size or head.config.block_size)
        self._mask = int(head.config.mask_token_id)

    def forward(self, inputs: mx.array, cache: list[Any]) -> tuple[mx.array, mx.array]:
        self._outputs.clear()
        logits: mx.array = self.target(inputs, cache=cache[: self.split])
        features = mx.concatenate([self._outputs[i] for i in self._ids], axis=-1)
        return logits, features

    def read_positions(
        self, inputs: mx.array, features: mx.array, before: mx.array, cache: list[Any]
    ) -> None:
        """The head keeps the features of every position read (a right-padded prefill's
        padding included, as the target's caches do)."""
        self.head._hidden(inputs[:, :1], features, self.head_caches(cache))

    def read_verified(self, inputs: mx.array, features: mx.array, cache: list[Any]) -> None:
        self.head._hidden(inputs[:, :1], features, self.head_caches(cache))

    def drafts(
        self,
        pending: mx.array,
        width: int,
        cache: list[Any],
        rules: dict[int, RuleSampler],
        log_q: dict[int, list[mx.array]],
    ) -> list[mx.array]:
        """One forward of a block (the pending token, then mask tokens) over the entries
        the head holds: each mask position's logits give a draft (greedy, or drawn from a
        sampled row's rule). The block reads one entry more, the kept features again (an
        empty context cannot pass through mlx-vlm's attention), taken back after."""
        rows = pending.shape[0]
        size = max(self.block, width + 1)
        masks = mx.full((rows, size - 1), self._mask, dtype=pending.dtype)
        block = mx.concatenate([pending[:, None], masks], axis=1)
        caches = self.head_caches(cache)
        hidden = self.head._hidden(block, self.kept(cache, rows), caches)
        for c in caches:
            c.trim(1)
        logits = self.head._logits(hidden[:, 1 : width + 1])
        return [next_drafts(logits[:, j], rules, j, log_q)[:, None] for j in range(width)]

    def draft_hidden(self, tokens: mx.array, features: mx.array, cache: list[Any]) -> mx.array:
        raise NotImplementedError("a DFlash head drafts a block at once (drafts)")

    def draft_logits(self, hidden: mx.array) -> mx.array:
        raise NotImplementedError("a DFlash head drafts a block at once (drafts)")
