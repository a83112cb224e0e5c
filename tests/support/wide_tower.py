"""A stand-in vision model for the image-encoding cache's tests: a tower of the Qwen-VL call
shape (`vision_tower(pixels, grid_thw)`) whose output is large, 4,096 float32s a patch (no
merger: one output token a patch), so that an image of 256 patches is 4 MiB of encoding."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.image_prompt import VisionInputs

WIDTH = 4096
MIB = 1 << 20


class WideTower:
    """`vision_tower`: each patch's first pixel value, 4,096 times."""

    patch_embed = type("P", (), {"proj": type("W", (), {"weight": mx.zeros(1)})()})()

    def __call__(self, pixels: mx.array, grids: mx.array, output_hidden_states: bool) -> mx.array:
        return mx.broadcast_to(pixels[:, :1], (pixels.shape[0], WIDTH)) + 0


def wide_model() -> Any:
    """A model with only that tower (what `ImageEncoder.encode` calls)."""
    return type("M", (), {"vision_tower": WideTower()})()


def wide_image(k: int, side: int = 16) -> VisionInputs:
    """A prompt of one image, key `image-k`, of `side` x `side` patches, each valued `k`:
    `side`² x 16 KiB of encoding (16: 4 MiB)."""
    return VisionInputs(
        np.full((side * side, 8), k, np.float32), np.array([[1, side, side]]), (f"image-{k}",)
    )
