"""An EAGLE-3 drafter folder (mlx-vlm's format: a Speculators/SGLang `eagle3` checkpoint,
loaded by mlx-vlm's `load_drafter` into its `Eagle3DraftModel`) drafting for the served model.

The head reads three of the target's layers' outputs at position p, concatenated (`fc` brings
them to its width), and the embedding of the token at p + 1; it drafts further from its own
hidden states and predicts over its own vocabulary, mapped to the target's ids (`d2t`).
`heads.py` says how it rides along with the target. The layers' outputs are taken as the
target runs: the chosen layers' classes are swapped for subclasses that hand their output to
the model (nothing else of the target changes).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.heads import HeadedModel
from mlx_responses.service.engine.mlx_lm_compat import create_attention_mask


def captured(layer: Any, sink: Any) -> None:
    """Swaps `layer`'s class for a subclass whose call hands its output to `sink`."""
    base = type(layer)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = base.__call__(self, *args, **kwargs)
        sink(out)
        return out

    layer.__class__ = type(f"Captured{base.__name__}", (base,), {"__call__": call})


class Eagle3Model(HeadedModel):
    """The target with an EAGLE-3 head (mlx-vlm's class, bound to the target's embeddings
    where their shapes match)."""

    kind = "eagle3"

    def __init__(self, target: Any, head: Any) -> None:
        # The outputs of these layers, in layer order (as mlx-vlm's targets capture them).
        self._ids = sorted(head.config.capture_layer_ids)
        super().__init__(target, head, len(self._ids) * int(head.target_hidden_size))
        self._outputs: dict[int, mx.array] = {}
        for i in set(self._ids):
            captured(target.layers[i], lambda out, i=i: self._outputs.__setitem__(i, out))
        vocab = int(head.target_vocab_size)
        # Each draft id's target id (the head predicts over its own, smaller vocabulary).
        self._to_target = None
        if head.d2t is not None:
            self._to_target = mx.arange(head.draft_vocab_size) + head.d2t
        self._vocab = vocab

    def forward(self, inputs: mx.array, cache: list[Any]) -> tuple[mx.array, mx.array]:
        self._outputs.clear()
        logits: mx.array = self.target(inputs, cache=cache[: self.split])
        features = mx.concatenate([self._outputs[i] for i in self._ids], axis=-1)
        return logits, features

    def draft_hidden(self, tokens: mx.array, features: mx.array, cache: list[Any]) -> mx.array:
        head = self.head
        caches = self.head_caches(cache)
        h = head._prepare_target_hidden(features)  # `fc` over the target's features
        embeds = head.embed_tokens(tokens)
        offset = caches[0].offset  # every layer's positions: before the first one writes
        for i, (layer, c) in enumerate(zip(head.layers, caches, strict=True)):
            mask = create_attention_mask(h, c)
            h = layer(embeds, h, mask, c, offset) if i == 0 else layer(h, mask, c, offset)
        return h

    def draft_logits(self, hidden: mx.array) -> mx.array:
        logits: mx.array = self.head._logits(hidden)
        if self._to_target is None:
            return logits
        full = mx.full((*logits.shape[:-1], self._vocab), -mx.inf, dtype=logits.dtype)
        full[..., self._to_target] = logits
        return full
