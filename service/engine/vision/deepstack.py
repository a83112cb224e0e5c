"""Qwen3-VL's "deepstack" features: what its vision tower gives beside each image token's main
features (one more [tokens, hidden] per tapped vision layer), which its language model adds to
the image tokens' hidden states after its first layers (layer k's output gets features k).

The encoder caches an image's encoding as one array, its main features and each deepstack
layer's side by side (`joined`: [tokens, (1 + layers) * hidden]), so that one image's slice,
several images' concatenation and the cache treat it as they treat Qwen2-VL's [tokens, hidden].
A prompt carries them as a `Deepstack` (`image_prompt.py`): which of its positions are image
tokens and their features in order; a prefill chunk takes the features of the image tokens inside it
(`Deepstack.chunk`), and a batched forward the rows' masks ([rows, width], a host array:
mlx-vlm's language model finds each row's image tokens with numpy, so a device array would sync
the step at every deepstack layer) and their features, row after row ([layers, n, hidden]).
"""

from __future__ import annotations

from collections.abc import Sequence

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.image_prompt import Deepstack


def joined(features: mx.array | tuple[mx.array, Sequence[mx.array]]) -> mx.array:
    """A tower's output as the encoder holds it: Qwen2-VL's [tokens, hidden] as it is;
    Qwen3-VL's (main, [per layer]) side by side, [tokens, (1 + layers) * hidden]."""
    if isinstance(features, mx.array):
        return features
    main, layers = features
    return mx.concatenate([main, *layers], axis=-1) if len(layers) else main


def split(features: mx.array, hidden: int) -> tuple[mx.array, mx.array | None]:
    """`joined`'s [tokens, (1 + layers) * hidden] -> the main features [tokens, hidden] and
    the deepstack ones [layers, tokens, hidden] (None: it held the main ones alone)."""
    layers = features.shape[-1] // hidden - 1
    if layers <= 0:
        return features, None
    stack = features[:, hidden:].reshape(features.shape[0], layers, hidden)
    return features[:, :hidden], stack.transpose(1, 0, 2)


def chunk_deepstack(
    parts: Sequence[tuple[Deepstack | None, int, int]], width: int
) -> dict[str, object]:
    """A prefill forward's deepstack arguments for its rows (each: its `Deepstack` or None,
    where its chunk starts in it, the chunk's length), right-padded to `width`: `visual`, the
    rows' masks, and `deepstack`, their image tokens' features row after row; empty when no
    chunk holds an image token."""
    rows = len(parts)
    mask = np.zeros((rows, width), bool)
    features: list[mx.array] = []
    for r, (stack, at, length) in enumerate(parts):
        if stack is None or not 0 <= at < len(stack.mask):
            continue
        cut, held = stack.chunk(at, length)
        if held is not None:
            mask[r, : len(cut)] = cut
            features.append(held)
    if not features:
        return {}
    stacked = features[0] if len(features) == 1 else mx.concatenate(features, axis=1)
    return {"visual": mask, "deepstack": stacked}
