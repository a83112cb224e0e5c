"""A random MTP layer of DeepSeek-V3's kind (GLM-4.5's, GLM-4.7-Flash's) written into a model
folder as a checkpoint ships it: the tensors of `model.layers.{num_hidden_layers}.*` in the
Hugging Face layout (each expert's projections apart, a latent attention's `kv_b_proj` whole,
the layer's own `embed_tokens` and `shared_head`), in a safetensors file of their own beside
the model's, and the config's `num_nextn_predict_layers: 1`."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.utils import load_model
from mlx_responses.service.engine.deepseek_mtp import DeepseekMTPHead, prefix


def _checkpoint_names(weights: dict[str, mx.array]) -> dict[str, mx.array]:
    """The head's tensors under the checkpoint's names (what mlx-lm's sanitize undoes)."""
    out: dict[str, mx.array] = {}
    attention = "layers.0.self_attn."
    for name, value in weights.items():
        if ".switch_mlp." in name:  # [experts, out, in] -> one tensor per expert
            before, after = name.split(".switch_mlp.")
            for e in range(value.shape[0]):
                out[f"{before}.experts.{e}.{after}"] = value[e]
        elif name.startswith((attention + "embed_q", attention + "unembed_out")):
            continue
        else:
            out[name] = value
    if attention + "embed_q.weight" in weights:  # latent attention: kv_b_proj as it ships
        keys = weights[attention + "embed_q.weight"]  # [heads, kv_lora, nope]
        values = weights[attention + "unembed_out.weight"]  # [heads, v, kv_lora]
        whole = mx.concatenate([keys.swapaxes(-1, -2), values], axis=1)
        out[attention + "kv_b_proj.weight"] = whole.reshape(-1, whole.shape[-1])
    return {k.removeprefix("layers.0."): v for k, v in out.items()}


def add_deepseek_mtp_head(folder: Path, *, seed: int = 3) -> Path:
    """Writes a random MTP layer for the model in `folder` (`deepseek_mtp.DECODERS`' families)."""
    model, _ = load_model(folder)
    mx.random.seed(seed)
    head = DeepseekMTPHead(model)
    weights = dict(tree_flatten(head.parameters()))
    named = _checkpoint_names(weights)
    named["embed_tokens.weight"] = model.model.embed_tokens.weight
    at = prefix(model)
    mx.save_safetensors(
        str(folder / "model-mtp.safetensors"), {at + k: v for k, v in named.items()}
    )
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    config["num_nextn_predict_layers"] = 1
    config_path.write_text(json.dumps(config, indent=2))
    return folder
