"""A vision prompt's input embeddings, computed off the decode step: the vision tower's output for
each image (cached by the image's content), merged into the text's embeddings, with the
prompt's rotary positions (`positions.py`).

It runs on the engine's thread when a request is admitted, before its sequence joins the batch:
the batch then prefills the language model from these embeddings, as it prefills a text prompt
from its tokens.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.vision.inputs import VisionCacheStats, VisionInputs
from mlx_responses.service.engine.vision.positions import TEXT, RowPositions, row_positions


@dataclass(frozen=True)
class VisionPrompt:
    """What a sequence prefills from: one embedding per prompt token ([n, hidden]) and its
    positions."""

    embeds: mx.array
    positions: RowPositions


@dataclass
class ImageEncoder:
    """Owned by the engine thread: image content hash -> the vision tower's output for it."""

    entries: int = 64
    stats: VisionCacheStats = field(default_factory=VisionCacheStats)

    def __post_init__(self) -> None:
        self._encodings: OrderedDict[str, mx.array] = OrderedDict()

    def clear(self) -> None:
        self._encodings.clear()
        self.stats.entries = 0

    def prompt(self, model: Any, tokens: list[int], inputs: VisionInputs | None) -> VisionPrompt:
        """`tokens` embedded, each image's tokens replaced by its encoding, and positioned."""
        ids = mx.array([tokens])
        kwargs: dict[str, Any] = (
            {key: mx.array(value) for key, value in inputs.extra.items()} if inputs else {}
        )
        pixels = None
        if inputs is not None and inputs.pixel_values is not None:
            pixels = mx.array(inputs.pixel_values)
            if inputs.image_grid_thw is not None:
                kwargs["image_grid_thw"] = mx.array(inputs.image_grid_thw)
                features = self._encode(model, inputs, pixels)
                if features is not None:
                    kwargs["cached_image_features"] = features
        out = model.get_input_embeddings(ids, pixels, **kwargs)
        positions = row_positions(
            getattr(out, "position_ids", None), getattr(out, "rope_deltas", None)
        )
        embeds = out.inputs_embeds[0]
        mx.eval(embeds)
        return VisionPrompt(embeds, positions if pixels is not None else TEXT)

    def positions(self, model: Any, tokens: list[int], inputs: VisionInputs) -> RowPositions:
        """`tokens`' positions alone (no tower, no embeddings): Qwen-VL's `get_rope_index`
        over the images' grids, as `prompt` computes them."""
        grid = None if inputs.image_grid_thw is None else mx.array(inputs.image_grid_thw)
        ids, delta = model.language_model.get_rope_index(mx.array([tokens]), grid)
        return row_positions(ids, delta)

    def _encode(self, model: Any, inputs: VisionInputs, pixel_values: mx.array) -> mx.array | None:
        """The vision tower's output for every image, cached per image by content hash.

        Qwen-VL layout only (a `vision_tower(pixels, grid_thw)` and one grid row per image);
        other architectures encode inside `get_input_embeddings`, uncached.
        """
        tower = getattr(model, "vision_tower", None)
        grid = inputs.image_grid_thw
        if tower is None or grid is None or len(grid) != len(inputs.image_keys):
            return None
        dtype = tower.patch_embed.proj.weight.dtype
        parts: list[mx.array] = []
        offset = 0
        for key, row in zip(inputs.image_keys, grid, strict=True):
            patches = int(np.prod(row))
            cached = self._encodings.get(key)
            if cached is not None:
                self._encodings.move_to_end(key)
                self.stats.hits += 1
                parts.append(cached)
            else:
                started = time.perf_counter()
                pixels = pixel_values[offset : offset + patches].astype(dtype)
                features = tower(pixels, mx.array(row[None, :]), output_hidden_states=False)
                mx.eval(features)
                self.stats.encode_seconds += time.perf_counter() - started
                self.stats.misses += 1
                self._encodings[key] = features
                while len(self._encodings) > self.entries:
                    self._encodings.popitem(last=False)
                parts.append(features)
            offset += patches
        self.stats.entries = len(self._encodings)
        return mx.concatenate(parts, axis=0)
