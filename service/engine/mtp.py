"""The checkpoint's own multi-token-prediction (MTP) head, drafting for the model it ships in.

Qwen3.5 (and Qwen3-Next) checkpoints carry an MTP head beside the model: `mtp.*` tensors that
mlx-lm's `sanitize` throws away. `mtp_weights` reads them from the safetensors (the one place
that does), and `load_mtp` builds mlx-vlm's drafter class for the family
(`mlx_vlm.speculative.drafters.qwen3_5_mtp`: its layers, norms and `fc`, its `sanitize` for the
checkpoint's names) around them, bound to the target's embeddings and output head.

The head reads, at position p, the target's last hidden state at p and the embedding of the
token at p + 1, and predicts the token at p + 2; it attends over its own earlier positions
(a KV cache per head layer). `MTPModel` is the target with the head riding along, as
`draft_model.DraftedModel` is for a draft model: its caches are the target's, then the head's,
then one `ArraysCache` holding each row's last hidden state (what the head reads next), so
mlx-lm's prefill, prompt cache, merge, filter and extract keep all three in step. Every target
forward over positions n..n+L-1 has the head read positions n-1..n+L-2 (the hidden kept from
the last forward, then this one's), so the head's caches always hold as many positions as the
target's (its first one reads a zero hidden state) and a rejected draft trims both alike
(`batch/speculative.py`).

NOTE: DeepSeek-V3-shaped heads (`model.layers.{num_hidden_layers}.*`: `enorm`, `hnorm`,
`eh_proj`, `shared_head`) are not served: mlx-vlm 0.7.10 has no drafter class for them
(`deepseek_v4_mtp` is DeepSeek-V4's hyper-connection block, `glm4_moe_lite_mtp` ships a config
and a splitter but no model, `glm_moe_dsa_mtp` is GLM-5's sparse-attention block).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx import nn
from mlx.utils import tree_flatten
from mlx_responses.service.engine.architectures import model_type
from mlx_responses.service.engine.mlx_lm_compat import ArraysCache, KVCache, make_prompt_cache

log = logging.getLogger(__name__)

PREFIX = "mtp."
# model_type -> the mlx-vlm drafter package that builds its head.
FAMILIES = {
    "qwen3_5": "mlx_vlm.speculative.drafters.qwen3_5_mtp",
    "qwen3_5_moe": "mlx_vlm.speculative.drafters.qwen3_5_mtp",
}


def mtp_weights(path: Path) -> dict[str, mx.array]:
    """The checkpoint's `mtp.*` tensors (empty: it has no MTP head), read from the files that
    hold them (the safetensors index says which, when there is one)."""
    index = path / "model.safetensors.index.json"
    if index.exists():
        weight_map: dict[str, str] = json.loads(index.read_text()).get("weight_map", {})
        files = sorted({path / f for k, f in weight_map.items() if k.startswith(PREFIX)})
    else:
        files = sorted(path.glob("*.safetensors"))
    found: dict[str, mx.array] = {}
    for file in files:
        loaded: Any = mx.load(str(file))
        found.update({k: v for k, v in loaded.items() if k.startswith(PREFIX)})
    return found


def _text_config(model: Any) -> dict[str, Any]:
    """The target's text arguments as mlx-vlm's Qwen3.5 config reads them (its rope parameters
    complete: text positions are one position on every mrope section, any split serves)."""
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


def load_mtp(model: Any, path: Path) -> MTPModel | None:
    """`model` (loaded from `path`) with its checkpoint's MTP head; None when the checkpoint
    has none, or its family's head is not one we build (logged)."""
    weights = mtp_weights(path)
    if not weights:
        return None
    family = FAMILIES.get(model_type(model) or "")
    if family is None:
        log.info("%s has an MTP head (%d tensors) of a family not served", path, len(weights))
        return None
    import importlib

    drafter = importlib.import_module(family)
    head = drafter.Model(drafter.ModelConfig.from_dict({"text_config": _text_config(model)}))
    weights = head.sanitize(weights)
    quantization = json.loads((path / "config.json").read_text()).get("quantization")
    if quantization and any(k.endswith(".scales") for k in weights):
        nn.quantize(
            head,
            group_size=quantization["group_size"],
            bits=quantization["bits"],
            class_predicate=lambda p, m: f"{p}.scales" in weights,
        )
    head.load_weights(list(weights.items()), strict=True)
    mx.eval(head.parameters())
    head.bind(model)
    log.info("%s drafts with its own MTP head (%d layers)", path, len(head.layers))
    return MTPModel(model, head)


def _parameters(module: Any) -> int:
    weights: Any = tree_flatten(module.parameters())
    return sum(int(w.nbytes) for _, w in weights)


class MTPModel:
    """The target with its MTP head riding along: one call advances the target's caches and
    the head's (their arrays queued with `async_eval`; the head's logits are never computed
    there). Returns the target's logits."""

    def __init__(self, target: Any, head: Any) -> None:
        self.target = target
        self.head = head
        lm = getattr(target, "language_model", target)
        self._inner = lm.model
        tied = getattr(lm, "args", None) is not None and lm.args.tie_word_embeddings
        self.project = lm.model.embed_tokens.as_linear if tied else lm.lm_head
        self.split = len(make_prompt_cache(target))  # the first head cache
        self.layers = [*target.layers, *head.layers]
        self._cost: float | None = None

    def cost_ratio(self) -> float:
        """A draft position's cost next to a target forward: their weights' bytes, as a ratio."""
        if self._cost is None:
            self._cost = _parameters(self.head) / max(1, _parameters(self.target))
        return self._cost

    def make_cache(self) -> list[Any]:
        return [
            *make_prompt_cache(self.target),
            *(KVCache() for _ in self.head.layers),
            ArraysCache(1),
        ]

    def hidden(self, inputs: mx.array, cache: list[Any], **kwargs: Any) -> mx.array:
        """The target's last hidden states over `inputs` ([rows, positions, hidden])."""
        out: mx.array = self._inner(inputs, cache[: self.split], **kwargs)
        return out

    def __call__(self, inputs: mx.array, cache: list[Any], **kwargs: Any) -> mx.array:
        hidden = self.hidden(inputs, cache, **kwargs)
        self.read(inputs, hidden, cache)
        out: mx.array = self.project(hidden)
        return out

    def read(self, inputs: mx.array, hidden: mx.array, cache: list[Any]) -> None:
        """The head reads the positions before `inputs` (the kept hidden state, then `hidden`
        but its last), and keeps each row's last hidden state (a right-padded prefill's:
        its last real position's)."""
        kept = cache[-1]
        rows, width = inputs.shape[0], inputs.shape[1]
        before = self.kept(cache, rows)
        self.draft_hidden(inputs, mx.concatenate([before, hidden[:, :-1]], axis=1), cache)
        last = hidden[:, -1:]
        if kept.lengths is not None:  # a right-padded prefill chunk: rows end where they do
            ends = kept.lengths
            at = mx.clip(ends - 1, 0, width - 1)[:, None, None]
            picked = mx.take_along_axis(hidden, at, axis=1)
            last = mx.where((ends > 0)[:, None, None], picked, before)
            kept.advance(width)
        kept[0] = last
        mx.async_eval(last, [(c.keys, c.values) for c in cache[self.split : -1]])

    def kept(self, cache: list[Any], rows: int) -> mx.array:
        """Each row's kept hidden state ([rows, 1, hidden]; zeros for a row that has none)."""
        held = cache[-1][0]
        if held is None or held.shape[0] != rows:
            dims = self._inner.embed_tokens.weight.shape[-1]
            return mx.zeros((rows, 1, dims), dtype=self._inner.embed_tokens.weight.dtype)
        return held

    def draft_hidden(self, tokens: mx.array, hidden: mx.array, cache: list[Any]) -> mx.array:
        """The head over `tokens` with the hidden states before them ([rows, positions,
        hidden]): writes its caches, returns its hidden states."""
        caches = cache[self.split : -1]
        offset = caches[0].offset
        steps = mx.arange(tokens.shape[1])
        if isinstance(offset, mx.array):
            positions = offset[:, None] + steps[None]
        else:
            positions = mx.broadcast_to((steps + offset)[None], (tokens.shape[0], tokens.shape[1]))
        embedded = self._inner.embed_tokens(tokens)
        out: mx.array = self.head._forward_hidden(
            embedded, hidden, caches, mx.broadcast_to(positions[None], (3, *positions.shape))
        )
        return out
