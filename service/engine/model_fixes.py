"""Our workarounds for mlx-lm architectures that fail on a path mlx-lm's own tests do not
take, applied to a model as it loads (`fix_model`); each one is to report upstream.

- gemma2 (mlx-lm 0.32): its attention folds the query heads that share a KV head into 5-D
  scores `(B, kv heads, repeats, L, S)` and adds a 4-D mask `(B, 1, L, S)` to them. One row
  broadcasts; a batch of several does not (`[broadcast_shapes] (4,1,1,33) and (4,2,2,1,33)`:
  mlx-lm's own `batch_generate` fails so with three prompts). The mask gains the repeats axis
  (`(B, 1, 1, L, S)`), which is the mask it meant for every row.
- seed_oss (mlx-lm 0.32) with tied embeddings computes its logits as
  `h @ embed_tokens.weight.T`: quantized, that weight is packed (`[matmul] ... (1,9,64) ...
  (8,3456)` on its first request; mlx-lm's own `generate` fails so). The logits come from
  `embed_tokens.as_linear(h)` instead, as every other tied mlx-lm model computes them (the same
  product where the embedding is not quantized).
- deepseek_v3 (mlx-lm 0.32): its `sanitize` drops the checkpoint's MTP layer by the number
  DeepSeek-V3 has, `model.layers.61`; a checkpoint of another depth with an MTP layer
  (`num_nextn_predict_layers`) fails its strict load on that layer's tensors. It is dropped
  at `model.layers.{num_hidden_layers}`, whatever the depth (`loading_classes`, before the
  load; `deepseek_mtp.py` reads it for drafting).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.architectures import model_type


def fix_model(model: Any) -> None:
    """Applies the workarounds `model`'s architecture needs (most need none)."""
    if model_type(model) == "gemma2":
        _fix_gemma2(model)
    if model_type(model) == "seed_oss" and getattr(model, "tie_word_embeddings", False):
        _fix_tied_head(model)


def _fix_gemma2(model: Any) -> None:
    for layer in model.layers:
        attention = layer.self_attn
        if attention.repeats > 1 and not isinstance(attention, _Gemma2Attention):
            attention.__class__ = _gemma2_attention(type(attention))


_FIXED: dict[type, type] = {}


class _Gemma2Attention:
    """Marks an attention layer already fixed."""


def _gemma2_attention(base: type) -> type:
    """`base` (mlx-lm's gemma2 Attention) with its mask given the repeats axis."""
    if base not in _FIXED:

        def __call__(self: Any, x: mx.array, mask: Any = None, cache: Any = None) -> mx.array:
            if isinstance(mask, mx.array) and mask.ndim == 4:
                mask = mx.expand_dims(mask, 2)
            return base.__call__(self, x, mask, cache)  # type: ignore[no-any-return]

        _FIXED[base] = type(base.__name__, (_Gemma2Attention, base), {"__call__": __call__})
    return _FIXED[base]


class _TiedHead:
    """Marks a model whose tied head is already fixed."""


def _fix_tied_head(model: Any) -> None:
    base = type(model)
    if isinstance(model, _TiedHead):
        return
    if base not in _FIXED:

        def __call__(self: Any, inputs: mx.array, cache: Any = None) -> mx.array:
            return self.model.embed_tokens.as_linear(self.model(inputs, cache=cache))  # type: ignore[no-any-return]

        _FIXED[base] = type(base.__name__, (_TiedHead, base), {"__call__": __call__})
    model.__class__ = _FIXED[base]


def loading_classes(config: dict[str, Any]) -> Callable[[dict[str, Any]], tuple[type, type]] | None:
    """The (model, args) classes mlx-lm's loader is to build for `config` where ours differ
    from its own (None: its own)."""
    if config.get("model_type") != "deepseek_v3" or not config.get("num_nextn_predict_layers"):
        return None
    family = importlib.import_module("mlx_lm.models.deepseek_v3")
    classes = (_without_mtp_layer(family.Model), family.ModelArgs)
    return lambda config: classes


_LOADING: dict[type, type] = {}


def _without_mtp_layer(base: type) -> type:
    """`base` (mlx-lm's deepseek_v3 Model) whose `sanitize` drops the MTP layer wherever the
    checkpoint's depth puts it."""
    if base not in _LOADING:

        def sanitize(self: Any, weights: dict[str, mx.array]) -> dict[str, mx.array]:
            layer = f"model.layers.{self.args.num_hidden_layers}."
            kept = {k: v for k, v in weights.items() if not k.startswith(layer)}
            return base.sanitize(self, kept)  # type: ignore[attr-defined,no-any-return]

        _LOADING[base] = type(
            base.__name__, (base,), {"sanitize": sanitize, "__module__": base.__module__}
        )
    return _LOADING[base]
