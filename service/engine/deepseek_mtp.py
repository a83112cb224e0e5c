"""DeepSeek-V3's own multi-token-prediction (MTP) head, drafting for the model it ships in.

A DeepSeek-V3 checkpoint (`num_nextn_predict_layers: 1`) carries its MTP module as one more
layer, `model.layers.{num_hidden_layers}.*`: `enorm` (the next token's embedding) and `hnorm`
(the model's hidden state), `eh_proj` bringing the two concatenated back to the model's width,
a full decoder layer of the model's own kind (multi-head latent attention, a mixture of
experts), and `shared_head` (`norm`, then `head` over the vocabulary); its `embed_tokens` is
the model's. GLM-4.5 (`glm4_moe`) and GLM-4.7-Flash (`glm4_moe_lite`) ship theirs the same
way. mlx-lm's `sanitize` drops the layer and mlx-vlm 0.7.10 has no drafter class for it (its
`glm4_moe_lite_mtp` ships a config and a splitter, no model), so this module builds the head:
the decoder layer is mlx-lm's class of the target's family, and the target's own `sanitize`
reads the layer's tensors (fp8 blocks dequantized, experts stacked, `kv_b_proj` split as for
every layer). It rides along as the Qwen3.5 head does (`mtp.MTPModel`, `heads.py`): at
position p it reads the target's last (normed) hidden state and the token at p + 1, and
predicts the one after; it drafts further from its own hidden states (before
`shared_head.norm`, which `hnorm` normalises again).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx import nn
from mlx.utils import tree_flatten
from mlx_responses.service.engine.architectures import model_type
from mlx_responses.service.engine.mlx_lm_compat import create_attention_mask
from mlx_responses.service.engine.mtp import MTPModel, checkpoint_tensors, quantize_as_checkpoint

log = logging.getLogger(__name__)

# model_type -> its decoder layer's class in its mlx-lm module: the families that ship their MTP
# layer so (GLM-4.5's `glm4_moe`, GLM-4.7-Flash's `glm4_moe_lite` as DeepSeek-V3 does).
DECODERS = {
    "deepseek_v3": "DeepseekV3DecoderLayer",
    "glm4_moe": "DecoderLayer",
    "glm4_moe_lite": "Glm4MoeLiteDecoderLayer",
}
# The head's own modules; the layer's attention, experts and norms go in `layers.0`.
OWN = ("enorm.", "hnorm.", "eh_proj.", "shared_head.")
SHARED = ("embed_tokens.",)  # the model's own, not read again


def prefix(model: Any) -> str:
    """Where `model`'s checkpoint keeps its MTP layer."""
    return f"model.layers.{model.args.num_hidden_layers}."


class SharedHead(nn.Module):
    def __init__(self, hidden: int, vocab: int, eps: float) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=eps)
        self.head = nn.Linear(hidden, vocab, bias=False)


class DeepseekMTPHead(nn.Module):
    """The MTP layer: the next token's embedding and the model's hidden state, normed,
    projected to one width, through a decoder layer of the target's kind."""

    def __init__(self, target: Any) -> None:
        super().__init__()
        args = target.args
        hidden, eps = args.hidden_size, args.rms_norm_eps
        module = sys.modules[type(target).__module__]
        decoder = getattr(module, DECODERS[target.model_type])
        self.enorm = nn.RMSNorm(hidden, eps=eps)
        self.hnorm = nn.RMSNorm(hidden, eps=eps)
        self.eh_proj = nn.Linear(2 * hidden, hidden, bias=False)
        # Its index past the model's last: a mixture of experts, as DeepSeek-V3's MTP layer.
        self.layers = [decoder(args, args.num_hidden_layers)]
        self.shared_head = SharedHead(hidden, args.vocab_size, eps)

    def __call__(self, embedded: mx.array, features: mx.array, cache: list[Any]) -> mx.array:
        h = self.eh_proj(mx.concatenate([self.enorm(embedded), self.hnorm(features)], axis=-1))
        for layer, c in zip(self.layers, cache, strict=True):
            h = layer(h, create_attention_mask(h, c, return_array=True), c)
        return h

    def logits(self, hidden: mx.array) -> mx.array:
        out: mx.array = self.shared_head.head(self.shared_head.norm(hidden))
        return out


def head_weights(target: Any, found: dict[str, mx.array]) -> dict[str, mx.array]:
    """The checkpoint's MTP tensors (`model.layers.{n}.*`) under the head's names: the
    target's `sanitize` reads them as its first layer's, then they move to the head."""
    at = prefix(target)
    first = "model.layers.0."
    renamed = {first + k.removeprefix(at): v for k, v in found.items()}
    sanitized = target.sanitize(renamed)
    weights = {}
    for key, value in sanitized.items():
        name = key.removeprefix(first)
        if name.startswith(SHARED):
            continue
        weights[name if name.startswith(OWN) else f"layers.0.{name}"] = value
    return weights


def load_deepseek_mtp(model: Any, path: Path) -> DeepseekMTPModel | None:
    """`model` (loaded from `path`) with its checkpoint's MTP layer; None when the model is of
    another family or its checkpoint has no such layer."""
    if model_type(model) not in DECODERS:
        return None
    found = checkpoint_tensors(path, prefix(model))
    if not found:
        return None
    head = DeepseekMTPHead(model)
    weights = head_weights(model, found)
    if not any(k.startswith("shared_head.head.") for k in weights):  # the model's own head
        own: list[tuple[str, mx.array]] = tree_flatten(model.lm_head.parameters())  # type: ignore[assignment]
        weights |= {f"shared_head.head.{k}": v for k, v in own}
    quantize_as_checkpoint(head, weights, path)
    head.load_weights(list(weights.items()), strict=True)
    mx.eval(head.parameters())
    log.info("%s drafts with its own MTP layer (%s)", path, model_type(model))
    return DeepseekMTPModel(model, head)


class DeepseekMTPModel(MTPModel):
    """The target with its DeepSeek-V3 MTP head: the target's side as `MTPModel`'s, the head
    predicting through its own `shared_head`."""

    def draft_logits(self, hidden: mx.array) -> mx.array:
        out: mx.array = self.head.logits(hidden)
        return out

    def draft_hidden(self, tokens: mx.array, features: mx.array, cache: list[Any]) -> mx.array:
        out: mx.array = self.head(self.embed(tokens), features, self.head_caches(cache))
        return out
