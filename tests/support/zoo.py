"""Tiny random models of every text architecture mlx-lm ships (the zoo), in mlx-lm's folder layout.

Each config is generated from the architecture's `ModelArgs`: every field the architecture
declares that names a size takes a small value (`_SIZES`: hidden 64, 2 layers, 4 heads), and
`ARCHITECTURES` adds what an architecture needs beyond that (its layer pattern, its experts, its
recurrent state sizes). The tokenizer is the bundled one (`service/assets/tiny-chat`).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)
HIDDEN = 64
LAYERS = 2

# A small value for every field name that sizes a model, whichever architecture declares it.
_SIZES: dict[str, Any] = {
    "hidden_size": HIDDEN,
    "d_model": HIDDEN,
    "n_embd": HIDDEN,
    "dim": HIDDEN,
    "model_dim": HIDDEN,
    "num_hidden_layers": LAYERS,
    "n_layer": LAYERS,
    "n_layers": LAYERS,
    "num_layers": LAYERS,
    "intermediate_size": 128,
    "ffn_dim": 128,
    "ffn_hidden_size": 128,
    "num_attention_heads": 4,
    "n_head": 4,
    "n_heads": 4,
    "num_heads": 4,
    "num_key_value_heads": 2,
    "num_kv_heads": 2,
    "n_kv_heads": 2,
    "multi_query_group_num": 2,
    "head_dim": 16,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    # mixtures of experts
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_topk": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32,
    "shared_intermediate_size": 32,
}


def _partition(model_type: str) -> dict[str, Any]:
    return ARCHITECTURES.get(model_type, {})


# What each architecture needs beyond `_SIZES` (its layer pattern, recurrent state, experts).
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "qwen3_next": {
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "rms_norm_eps": 1e-6,
        "partial_rotary_factor": 0.25,
        "full_attention_interval": 2,
    },
    "qwen3_5": {
        "text_config": {
            "model_type": "qwen3_5",
            "hidden_size": HIDDEN,
            "num_hidden_layers": LAYERS,
            "intermediate_size": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "linear_num_value_heads": 4,
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_conv_kernel_dim": 4,
            "full_attention_interval": 2,
            "rms_norm_eps": 1e-6,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
            "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        }
    },
    "lfm2": {
        "norm_eps": 1e-5,
        "conv_bias": False,
        "conv_L_cache": 3,
        "block_dim": HIDDEN,
        "block_multiple_of": 16,
        "block_ffn_dim_multiplier": 1.0,
        "block_auto_adjust_ff_dim": False,
        "block_ff_dim": 128,
        "layer_types": ["conv", "full_attention"],
    },
    "nemotron_h": {
        "attention_bias": False,
        "mamba_num_heads": 4,
        "mamba_head_dim": 16,
        "mamba_proj_bias": False,
        "ssm_state_size": 16,
        "conv_kernel": 3,
        "n_groups": 2,
        "mlp_bias": False,
        "layer_norm_epsilon": 1e-5,
        "use_bias": False,
        "use_conv_bias": True,
        "hybrid_override_pattern": ["M", "*", "-"],
        "num_hidden_layers": 3,
    },
    "granitemoehybrid": {
        "attention_bias": False,
        "embedding_multiplier": 12.0,
        "attention_multiplier": 0.0625,
        "logits_scaling": 8.0,
        "residual_multiplier": 0.25,
        "layer_types": ["mamba", "attention"],
        "rms_norm_eps": 1e-5,
        "mamba_n_heads": 4,
        "mamba_d_head": 16,
        "mamba_proj_bias": False,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "mamba_n_groups": 1,
        "mamba_conv_bias": True,
    },
    "mamba2": {
        "num_heads": 8,
        "head_dim": 16,
        "state_size": 16,
        "layer_norm_epsilon": 1e-5,
        "conv_kernel": 4,
        "n_groups": 1,
        "use_bias": False,
        "use_conv_bias": True,
        "tie_word_embeddings": False,
        "time_step_limit": [0.0, 1e9],
        "time_step_rank": "auto",
    },
    "falcon_h1": {
        "mamba_d_ssm": 64,
        "mamba_d_state": 16,
        "mamba_n_heads": 4,
        "mamba_d_head": 16,
        "mamba_chunk_size": 16,
    },
}


def _args_class(model_type: str) -> Any:
    return importlib.import_module(f"mlx_lm.models.{model_type}").ModelArgs


def zoo_config(model_type: str, vocab_size: int) -> dict[str, Any]:
    """The config.json of `model_type`'s zoo model."""
    fields = {f.name for f in dataclasses.fields(_args_class(model_type))}
    config: dict[str, Any] = {"model_type": model_type}
    config |= {name: value for name, value in _SIZES.items() if name in fields}
    for name in ("vocab_size", "n_vocab", "vocabulary_size"):
        if name in fields:
            config[name] = vocab_size
    config |= ARCHITECTURES.get(model_type, {})
    if "text_config" in config:
        config["text_config"] = {**config["text_config"], "vocab_size": vocab_size}
    return config


def build_zoo_model(model_type: str, out: Path, *, seed: int = 0) -> Path:
    """Writes `model_type`'s zoo model (config.json, model.safetensors, tokenizer) into `out`."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import _get_classes

    base = json.loads((BUNDLED_MODEL / "config.json").read_text())
    config = zoo_config(model_type, base["vocab_size"])
    config["eos_token_id"] = base.get("eos_token_id")
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (BUNDLED_MODEL / name).exists():
            shutil.copy(BUNDLED_MODEL / name, out / name)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    mx.random.seed(seed)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    mx.eval(model.parameters())
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights)
    return out
