"""A vision-language model's language side as the slot scheduler calls a text model.

`model(inputs, cache=views)` gives logits, as an mlx-lm model does; `embeds` (a prefill chunk's
input embeddings, [rows, width, hidden]) replaces the token lookup and `positions` ([3, rows,
width], `positions.py`) the rotary positions that a text model derives from its cache's offset.
Without `positions`, each row's positions run on from its cache offset (text alone). Qwen3-VL's
chunk also takes `visual` and `deepstack` (its rows' image tokens and their deepstack features,
`deepstack.py`), which its language model adds to their hidden states in its first layers. Its
logits never pick an id past the tokenizer's (`decodable_only`).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.requests import LogitsProcessor


def decodable_only(n_tokens: int) -> LogitsProcessor:
    """Never sample an id past the tokenizer's: a model's head is often wider (padded), and
    a padding id has no text (the detokenizer would fail on it)."""

    def mask(tokens: mx.array, logits: mx.array) -> mx.array:
        if logits.shape[-1] <= n_tokens:
            return logits
        allowed = mx.arange(logits.shape[-1]) < n_tokens
        return mx.where(allowed, logits, mx.array(-mx.inf, logits.dtype))

    return mask


def is_vision_model(model: Any) -> bool:
    """An mlx-vlm model: a language side taking input embeddings, and their computation."""
    return hasattr(model, "language_model") and hasattr(model, "get_input_embeddings")


# The families whose attention cuts its mask at its cache's offset + 1 + the chunk's width and,
# where the rows' offsets differ (an array), takes their largest with `.item()` (mlx-vlm's
# Qwen3-VL-MoE): a sync in every layer, each waiting for the step queued before to finish. Their
# rows' positions come in `positions`, so they are shown the rows' largest offset, a Python int
# (`_Timeline`; the cut then cuts nothing, as it cut nothing before).
INT_OFFSET = ("qwen3_vl_moe",)


class _Timeline:
    """A KV view as such a family reads it: `offset` the rows' largest, all else the view's."""

    def __init__(self, view: Any, largest: int) -> None:
        self._view = view
        self.offset = largest

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)


class VisionLanguage:
    """Wraps an mlx-vlm model (`language_model` and `vision_tower`): its layers and forward."""

    def __init__(self, model: Any, n_tokens: int) -> None:
        """`n_tokens`: the tokenizer's ids (the head may be wider)."""
        self.vlm = model
        self.language = model.language_model
        self.layers = list(self.language.model.layers)
        self._decodable = decodable_only(n_tokens)
        self._int_offset = getattr(model.config, "model_type", None) in INT_OFFSET

    def embed(self, tokens: mx.array) -> mx.array:
        """[rows, width] token ids -> their input embeddings."""
        out: mx.array = self.language.model.embed_tokens(tokens)
        return out

    def __call__(
        self,
        inputs: mx.array,
        cache: list[Any] | None = None,
        *,
        embeds: mx.array | None = None,
        positions: mx.array | None = None,
        visual: np.ndarray | None = None,
        deepstack: mx.array | None = None,
    ) -> mx.array:
        if positions is None:
            positions = _positions_from(cache, inputs.shape[0], inputs.shape[1])
        if self._int_offset and cache and isinstance(cache[0].offset, mx.array):
            from mlx_vlm.models.base import cache_position_offset  # no sync on the views

            largest = cache_position_offset(cache[0])
            cache = [_Timeline(view, largest) for view in cache]
        extra: dict[str, Any] = {}
        if deepstack is not None:
            extra = {"visual_pos_masks": visual, "deepstack_visual_embeds": deepstack}
        out = self.language(
            inputs, inputs_embeds=embeds, cache=cache, position_ids=positions, **extra
        )
        logits: mx.array = self._decodable(inputs, out.logits)
        return logits


def _positions_from(cache: list[Any] | None, rows: int, width: int) -> mx.array:
    """[3, rows, width]: positions offset..offset+width-1 of each row (its cache's offset)."""
    offset = cache[0].offset if cache else 0
    base = mx.arange(width, dtype=mx.int32)[None, :]
    if isinstance(offset, mx.array) and offset.ndim > 0:
        ids = offset.astype(mx.int32)[:, None] + base
    else:
        ids = mx.broadcast_to(base + int(offset), (rows, width))
    return mx.broadcast_to(ids[None], (3, rows, width))
