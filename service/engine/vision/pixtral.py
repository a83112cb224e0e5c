"""Mistral 3's images (Pixtral's vision tower and Mistral 3's patch merger) one at a time, as
mlx-vlm's `get_input_embeddings` encodes them, for the encoder's cache (`encoder.py`).

A prompt's images come from the processor padded to the largest of them (`pixel_values`
[images, channels, height, width]), each with its own size (`image_sizes`); the tower attends
each image's patches alone (a block mask) and the merger folds each image's own grid, so an
image's features are the same whatever other images share its call: each is encoded from its
own pixels, cropped to its size, and kept by its content.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.image_prompt import VisionInputs


def merges_patches(model: Any) -> bool:
    """Mistral 3's layout: a projector that merges each image's patches on its own grid."""
    return hasattr(getattr(model, "multi_modal_projector", None), "patch_merger")


def pixtral_images(model: Any, inputs: VisionInputs) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Each image of a Mistral 3 prompt: its key, its pixels cropped to its size ([1, channels,
    height, width]) and its size ([height, width]); empty where the model or the inputs are not
    that layout (no patch merger, no `image_sizes`, not one size per image)."""
    sizes, pixels = inputs.extra.get("image_sizes"), inputs.pixel_values
    if not merges_patches(model) or sizes is None or pixels is None:
        return []
    if not len(sizes) == len(pixels) == len(inputs.image_keys):
        return []
    return [
        (key, pixels[k : k + 1, :, :h, :w], np.array([h, w]))
        for k, (key, (h, w)) in enumerate(zip(inputs.image_keys, sizes.tolist(), strict=True))
    ]


def pixtral_features(model: Any, pixels: np.ndarray, size: np.ndarray) -> mx.array:
    """One image's features ([tokens, hidden]): the tower's chosen layer through the
    projector (its norm, patch merger and MLP), as `get_input_embeddings` makes them."""
    sizes = mx.array(size[None])
    *_, hidden = model.vision_tower(
        mx.array(pixels).transpose(0, 2, 3, 1), output_hidden_states=True, image_sizes=sizes
    )
    chosen = hidden[model.vision_feature_layer]
    if chosen.ndim == 3 and chosen.shape[0] == 1:
        chosen = chosen[0]
    out: mx.array = model.multi_modal_projector(chosen, sizes)
    return out
