"""A vision prompt's input embeddings, computed off the decode step: the vision tower's output for
each image (cached by the image's content: the Qwen-VL layout's, and Mistral 3's, `pixtral.py`),
merged into the text's embeddings, with the prompt's rotary positions (`positions.py`).

It runs on the engine's thread when requests are admitted, before their sequences join the batch
(the images of the requests admitted together go through the tower in one call, `encode`): the
batch then prefills the language model from these embeddings, as it prefills a text prompt from
its tokens.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.image_prompt import TEXT, Deepstack, RowPositions, VisionInputs
from mlx_responses.service.engine.vision.deepstack import joined, split
from mlx_responses.service.engine.vision.pixtral import (
    merges_patches,
    pixtral_features,
    pixtral_images,
)
from mlx_responses.service.engine.vision.positions import MRoPE, row_positions


@dataclass
class VisionCacheStats:
    """Image-encoding cache counters (read by /metrics)."""

    hits: int = 0
    misses: int = 0
    encode_seconds: float = 0.0  # spent in the vision tower (misses)
    tower_calls: int = 0  # calls of the tower: images admitted together share one
    entries: int = 0
    bytes: int = 0  # the cached encodings' (`ImageEncoder.nbytes`)


@dataclass(frozen=True)
class VisionPrompt:
    """What a sequence prefills from: one embedding per prompt token ([n, hidden]) and its
    positions; a Qwen3-VL prompt's deepstack features too (its image tokens' and where they
    are, `deepstack.py`)."""

    embeds: mx.array
    positions: RowPositions
    deepstack: Deepstack | None = None


@dataclass
class ImageEncoder:
    """Owned by the engine thread: image content hash -> the vision tower's output for it, least
    recently used first, at most `entries` of them and `max_bytes` in all (an encoding larger
    than that is not kept). The model's KV store counts `nbytes` in the memory budget and
    `trim`s it when the budget is short (`kv_store.py`)."""

    entries: int = 64
    max_bytes: int = 1 << 30
    stats: VisionCacheStats = field(default_factory=VisionCacheStats)

    def __post_init__(self) -> None:
        self._encodings: OrderedDict[str, mx.array] = OrderedDict()
        self._nbytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes the cached encodings hold (each its own memory: `_tower`)."""
        return self._nbytes

    def clear(self) -> None:
        self.trim(0)

    def trim(self, n_bytes: int) -> None:
        """Evicts the least recently used encodings until the cache holds at most `n_bytes`
        (and `entries` encodings)."""
        while self._encodings and (
            self._nbytes > max(0, n_bytes) or len(self._encodings) > self.entries
        ):
            _, evicted = self._encodings.popitem(last=False)
            self._nbytes -= int(evicted.nbytes)
        self.stats.entries, self.stats.bytes = len(self._encodings), self._nbytes

    def _keep(self, encoded: dict[str, mx.array]) -> None:
        """`encoded` into the cache as its most recent encodings (but one over `max_bytes`),
        then the least recently used out past the bounds."""
        for key, features in encoded.items():
            if self.entries > 0 and int(features.nbytes) <= self.max_bytes:
                self._encodings[key] = features
                self._nbytes += int(features.nbytes)
        self.trim(self.max_bytes)

    def prompt(
        self,
        model: Any,
        tokens: list[int],
        inputs: VisionInputs | None,
        features: mx.array | None = None,
        mrope: MRoPE | None = None,
    ) -> VisionPrompt:
        """`tokens` embedded, each image's tokens replaced by its encoding, and positioned;
        `features`: the images' encodings when `encode` has them already (a batch admitted
        together), else they are encoded here. `mrope`: a Qwen-VL model's rule, which places
        the encodings and positions the prompt here (`_merged`), not through mlx-vlm's
        `get_input_embeddings` (its merge and `get_rope_index` sync the device several times
        per request)."""
        if features is None and inputs is not None and inputs.pixel_values is not None:
            features = self.encode(model, [inputs])[0]
        grids = inputs.image_grid_thw if inputs is not None else None
        if mrope is not None and features is not None and grids is not None:
            main, stack = split(features, int(model.config.text_config.hidden_size))
            spots = np.asarray(tokens) == mrope.image_token
            embeds = _merged(model, tokens, main, spots)
            mx.eval(embeds, stack)
            deepstack = Deepstack(spots, stack) if stack is not None else None
            return VisionPrompt(embeds, mrope.positions(tokens, grids), deepstack)
        ids = mx.array([tokens])
        kwargs: dict[str, Any] = (
            {key: mx.array(value) for key, value in inputs.extra.items()} if inputs else {}
        )
        pixels = None
        if inputs is not None and inputs.pixel_values is not None:
            pixels = mx.array(inputs.pixel_values)
            if inputs.image_grid_thw is not None:
                kwargs["image_grid_thw"] = mx.array(inputs.image_grid_thw)
            if features is not None:
                kwargs["cached_image_features"] = features
        out = model.get_input_embeddings(ids, pixels, **kwargs)
        positions = row_positions(
            getattr(out, "position_ids", None), getattr(out, "rope_deltas", None)
        )
        embeds = out.inputs_embeds[0]
        mx.eval(embeds)
        return VisionPrompt(embeds, positions if pixels is not None else TEXT)

    def encode(self, model: Any, prompts: Sequence[VisionInputs]) -> list[mx.array | None]:
        """Each prompt's images' vision-tower output, in order ([tokens, hidden]; Qwen3-VL's
        deepstack features beside the main ones, `deepstack.joined`), cached per image by
        content hash: the images no entry holds, of every prompt, go through the
        tower in one call (an image twice among them, once).

        The Qwen-VL layout (a `vision_tower(pixels, grid_thw)` and one grid row per image,
        each image attended on its own: one call over several gives each what a call of its
        own gives) and Mistral 3's (each image in a call of its own: `pixtral.py`); other
        architectures encode inside `get_input_embeddings`, uncached: None.
        """
        tower = getattr(model, "vision_tower", None)
        if tower is None:
            return [None] * len(prompts)
        # Per prompt, its images (key, pixel rows and grid row, or Mistral 3's pixels and
        # size); None: not a layout kept here.
        images = [_images(inputs) or pixtral_images(model, inputs) or None for inputs in prompts]
        missing: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for held in images:
            for key, pixels, grid in held or ():
                if key in self._encodings:
                    self._encodings.move_to_end(key)
                    self.stats.hits += 1
                elif key in missing:
                    self.stats.hits += 1  # encoded once, in this call
                else:
                    missing[key] = (pixels, grid)
        encoded: dict[str, mx.array] = {}
        if missing:
            encoded = (
                self._one_by_one(model, missing)
                if merges_patches(model)
                else self._tower(tower, missing)
            )
        out: list[mx.array | None] = []
        for held in images:
            if held is None:
                out.append(None)
                continue
            parts = [encoded[key] if key in encoded else self._encodings[key] for key, _, _ in held]
            out.append(mx.concatenate(parts, axis=0))
        self._keep(encoded)
        return out

    def _tower(
        self, tower: Any, images: dict[str, tuple[np.ndarray, np.ndarray]]
    ) -> dict[str, mx.array]:
        """One call of the tower over `images` (key -> pixel rows, grid row): each image's
        output, cut from the call's by its share of the patches."""
        started = time.perf_counter()
        dtype = tower.patch_embed.proj.weight.dtype
        rows = [pixels for pixels, _ in images.values()]
        grids = np.stack([grid for _, grid in images.values()])
        features = joined(
            tower(
                mx.array(np.concatenate(rows)).astype(dtype),
                mx.array(grids),
                output_hidden_states=False,
            )
        )
        # The merger folds a fixed number of patches into each output token.
        per_token = sum(len(pixels) for pixels in rows) // features.shape[0]
        bounds = np.cumsum([0] + [len(pixels) // per_token for pixels in rows])
        parts = [features[int(a) : int(b)] for a, b in pairwise(bounds)]
        if len(parts) > 1:
            # Each entry in its own memory: a slice would hold the whole call's output until
            # the last of its images left the cache.
            parts = [mx.contiguous(part) for part in parts]
        mx.eval(parts)
        self._count(started, len(images), 1)
        return dict(zip(images, parts, strict=True))

    def _one_by_one(
        self, model: Any, images: dict[str, tuple[np.ndarray, np.ndarray]]
    ) -> dict[str, mx.array]:
        """Mistral 3's `images` (key -> pixels, size), each through the tower in a call of its
        own: one call over several would attend every pair of their patches (masked), its
        cost growing with the square of their sum."""
        started = time.perf_counter()
        out = {key: pixtral_features(model, pixels, size) for key, (pixels, size) in images.items()}
        mx.eval(list(out.values()))
        self._count(started, len(images), len(images))
        return out

    def _count(self, started: float, images: int, calls: int) -> None:
        self.stats.encode_seconds += time.perf_counter() - started
        self.stats.misses += images
        self.stats.tower_calls += calls


def _merged(model: Any, tokens: list[int], features: mx.array, spots: np.ndarray) -> mx.array:
    """[n, hidden]: `tokens`' embeddings, the k-th image placeholder's (`spots`: True at each)
    replaced by row k of `features` (as mlx-vlm's Qwen-VL
    `merge_input_ids_with_image_features`, with the placeholders found on the host)."""
    if int(spots.sum()) != features.shape[0]:
        raise ValueError(
            f"{int(spots.sum())} image placeholders for {features.shape[0]} image features"
        )
    embeds = model.language_model.model.embed_tokens(mx.array(tokens))
    rows = mx.array(np.maximum(np.cumsum(spots) - 1, 0).astype(np.int32))
    return mx.where(mx.array(spots)[:, None], features[rows], embeds)


def _images(inputs: VisionInputs) -> list[tuple[str, np.ndarray, np.ndarray]] | None:
    """A Qwen-VL prompt's images: each one's key, pixel rows (one per patch) and grid row;
    None where the inputs are not that layout (no grid, or not one row per image)."""
    grid, pixels = inputs.image_grid_thw, inputs.pixel_values
    if grid is None or pixels is None or len(grid) != len(inputs.image_keys):
        return None
    out = []
    offset = 0
    for key, row in zip(inputs.image_keys, grid, strict=True):
        patches = int(np.prod(row))
        out.append((key, pixels[offset : offset + patches], row))
        offset += patches
    return out
