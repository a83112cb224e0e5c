"""The checkpoint's own multi-token-prediction (MTP) head, drafting for the model it ships in.

Qwen3.5 (and Qwen3-Next) checkpoints carry an MTP head beside the model: `mtp.*` tensors that
mlx-lm's `sanitize` throws away. `mtp_weights` reads them from the safetensors (the one place
that does), and `load_mtp` builds mlx-vlm's drafter class for the family
(`mlx_vlm.speculative.drafters.qwen3_5_mtp`: its layers, norms and `fc`, its `sanitize` for the
checkpoint's names) around them, bound to the target's embeddings and output head. The head
reads the target's last (normed) hidden state: `heads.py` says how it rides along.

DeepSeek-V3's head (and GLM-4.5's: `model.layers.{num_hidden_layers}.*`, which mlx-vlm 0.7.10
has no class for) is built by `deepseek_mtp.py`, on this module's `MTPModel`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx import nn
from mlx_responses.service.engine.architectures import model_type
from mlx_responses.service.engine.heads import HeadedModel, _embedding

log = logging.getLogger(__name__)

PREFIX = "mtp."
# model_type -> the mlx-vlm drafter package that builds its head.
FAMILIES = {
    "qwen3_5": "mlx_vlm.speculative.drafters.qwen3_5_mtp",
    "qwen3_5_moe": "mlx_vlm.speculative.drafters.qwen3_5_mtp",
}


def mtp_weights(path: Path) -> dict[str, mx.array]:
    """The checkpoint's `mtp.*` tensors (empty: it has no MTP head)."""
    return checkpoint_tensors(path, PREFIX)


def checkpoint_tensors(path: Path, prefix: str) -> dict[str, mx.array]:
    """The checkpoint's tensors whose names start with `prefix`, read from the files that
    hold them (the safetensors index says which, when there is one)."""
    index = path / "model.safetensors.index.json"
    if index.exists():
        weight_map: dict[str, str] = json.loads(index.read_text()).get("weight_map", {})
        files = sorted({path / f for k, f in weight_map.items() if k.startswith(prefix)})
    else:
        files = sorted(path.glob("*.safetensors"))
    found: dict[str, mx.array] = {}
    for file in files:
        loaded: Any = mx.load(str(file))
        found.update({k: v for k, v in loaded.items() if k.startswith(prefix)})
    return found


def text_config(model: Any) -> dict[str, Any]:
    """The target's text arguments as mlx-vlm's Qwen3.5 config reads them (its rope parameters
    complete: text positions are one position on every mrope section, any split serves); a
    vision model's language side (`vision/hybrid.py`) has mlx-vlm's own."""
    vlm = getattr(model, "vlm", None)
    if vlm is not None:
        return dict(dataclasses.asdict(vlm.config.text_config))
    lm = getattr(model, "language_model", model)
    args = dataclasses.asdict(lm.args)
    rope = dict(args.get("rope_parameters") or {})
    half = int(args["head_dim"] * rope.get("partial_rotary_factor", 0.25)) // 2
    rope.setdefault("type", "default")
    rope.setdefault("mrope_section", [half - 2 * (half // 3), half // 3, half // 3])
    rope.setdefault("rope_theta", args.get("rope_theta", 100000.0))
    rope.setdefault("partial_rotary_factor", args.get("partial_rotary_factor", 0.25))
    args["rope_parameters"] = rope
    return args


def new_head(model: Any) -> Any:
    """An MTP head (random weights) of the shape `model`'s family takes (None: no family)."""
    family = FAMILIES.get(model_type(model) or "")
    if family is None:
        return None
    drafter = importlib.import_module(family)
    return drafter.Model(drafter.ModelConfig.from_dict({"text_config": text_config(model)}))


def load_mtp(model: Any, path: Path) -> MTPModel | None:
    """`model` (loaded from `path`) with its checkpoint's MTP head; None when the checkpoint
    has none, or its family's head is not one we build (logged)."""
    weights = mtp_weights(path)
    if not weights:
        return None
    head = new_head(model)
    if head is None:
        log.info("%s has an MTP head (%d tensors) of a family not served", path, len(weights))
        return None
    weights = head.sanitize(weights)
    quantize_as_checkpoint(head, weights, path)
    head.load_weights(list(weights.items()), strict=True)
    mx.eval(head.parameters())
    log.info("%s drafts with its own MTP head (%d layers)", path, len(head.layers))
    return MTPModel(model, head)


def quantize_as_checkpoint(head: nn.Module, weights: dict[str, mx.array], path: Path) -> None:
    """Quantizes the modules of `head` that the checkpoint at `path` holds quantized (an
    mlx quantized checkpoint: its config's `quantization`, a module's `.scales` tensor)."""
    quantization = json.loads((path / "config.json").read_text()).get("quantization")
    if quantization and any(k.endswith(".scales") for k in weights):
        nn.quantize(
            head,
            group_size=quantization["group_size"],
            bits=quantization["bits"],
            class_predicate=lambda p, m: f"{p}.scales" in weights,
        )


class MTPModel(HeadedModel):
    """The target with its MTP head (mlx-vlm's class): the head reads the target's last
    (normed) hidden state and predicts through the target's output head. The target is an
    mlx-lm model, or a vision model's hybrid language side (`vision/hybrid.py`, which gives
    its hidden states itself)."""

    kind = "mtp"

    def __init__(self, target: Any, head: Any) -> None:
        super().__init__(target, head, _embedding(target).weight.shape[-1])
        if hasattr(target, "forward_hidden"):
            self.project = target.project
            self._forward = target.forward_hidden
            return
        lm = getattr(target, "language_model", target)
        tied = getattr(getattr(lm, "args", None), "tie_word_embeddings", False)
        self.project = lm.model.embed_tokens.as_linear if tied else lm.lm_head
        inner = lm.model

        def forward(inputs: mx.array, cache: list[Any]) -> tuple[mx.array, mx.array]:
            hidden: mx.array = inner(inputs, cache)
            return self.project(hidden), hidden

        self._forward = forward

    def forward(self, inputs: mx.array, cache: list[Any]) -> tuple[mx.array, mx.array]:
        logits, hidden = self._forward(inputs, cache[: self.split])
        return logits, hidden

    def draft_logits(self, hidden: mx.array) -> mx.array:
        out: mx.array = self.project(hidden)
        return out

    def draft_hidden(self, tokens: mx.array, features: mx.array, cache: list[Any]) -> mx.array:
        caches = self.head_caches(cache)
        offset = caches[0].offset
        steps = mx.arange(tokens.shape[1])
        if isinstance(offset, mx.array):
            positions = offset[:, None] + steps[None]
        else:
            shape = (tokens.shape[0], tokens.shape[1])
            positions = mx.broadcast_to((steps + offset)[None], shape)
        # mlx-vlm's qwen3_5 attention takes mrope positions: text ones, on every section.
        mrope = mx.broadcast_to(positions[None], (3, *positions.shape))
        out: mx.array = self.head._forward_hidden(self.embed(tokens), features, caches, mrope)
        return out
