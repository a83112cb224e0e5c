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
MAX_PARAMETERS = 4_000_000

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
    "expert_ffn_hidden_size": 32,
    "n_shared_experts": 1,
    "num_shared_experts": 1,
    "num_shared_expert": 1,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    # low-rank attention (MLA)
    "kv_lora_rank": 16,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "n_positions": 4096,
    "n_ctx": 4096,
    "block_size": 4096,
    "model_max_length": 4096,
}

# A value for every field an architecture requires (declares without a default) by these names.
_REQUIRED: dict[str, Any] = {
    "rms_norm_eps": 1e-5,
    "layer_norm_eps": 1e-5,
    "layer_norm_epsilon": 1e-5,
    "layernorm_epsilon": 1e-5,
    "norm_eps": 1e-5,
    "attention_bias": False,
    "mlp_bias": False,
    "use_bias": False,
    "use_qkv_bias": False,
    "tie_word_embeddings": False,
    "norm_topk_prob": True,
    "routed_scaling_factor": 1.0,
    "partial_rotary_factor": 0.5,
    "rotary_pct": 0.5,
    "rotary_emb_base": 10000.0,
    "mlp_only_layers": [],
    "decoder_sparse_step": 1,
    "rope_scaling": None,
    "use_qk_norm": False,
    "qk_norm": False,
    "post_norm": False,
    "hidden_act": "silu",
    "moe_layer_freq": 1,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "sliding_window": 8,
    "logits_scaling": 1.0,
    "attention_multiplier": 0.0625,
    "embedding_multiplier": 1.0,
    "residual_multiplier": 1.0,
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
            "linear_num_value_heads": 4,
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_conv_kernel_dim": 4,
            "full_attention_interval": 2,
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
        "mamba_n_heads": 8,  # transformers checks heads x head size = 2 x hidden
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


_YARN = {
    "type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 1024,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
_ALTERNATING = ["sliding_attention", "full_attention"]
_QWEN35_TEXT = {
    "linear_num_value_heads": 4,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
    "full_attention_interval": 2,
    "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25},
}
_LFM2 = {
    "norm_eps": 1e-5,
    "conv_bias": False,
    "conv_L_cache": 3,
    "block_dim": HIDDEN,
    "block_multiple_of": 16,
    "block_ffn_dim_multiplier": 1.0,
    "block_auto_adjust_ff_dim": False,
    "block_ff_dim": 128,
    "layer_types": ["conv", "full_attention"],
}
_MLA = {"qk_rope_head_dim": 8, "qk_nope_head_dim": 8}
_ROPE = {"rope_theta": 10000.0, "rope_type": "default"}
_MISTRAL_ROPE = {**_ROPE, "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 4096}
ARCHITECTURES |= {
    "afm7": {"hidden_dim": HIDDEN, "num_kv_reuse_layers": 1, "num_layers": 3},
    "afmoe": {"layer_types": _ALTERNATING, "sliding_window": 8, "num_dense_layers": 1},
    "baichuan_m1": {"sliding_window": 8, "sliding_window_layers": [0], "conv_window": 2},
    "bailing_hybrid": {
        "layer_group_size": 2,
        "group_norm_size": 1,
        "first_k_dense_replace": 0,
        **_MLA,
    },
    "bailing_moe_linear": {"layer_group_size": 2, "group_norm_size": 1, "first_k_dense_replace": 0},
    "cohere2": {"sliding_window": 8, "sliding_window_pattern": 2},
    "dbrx": {
        "ffn_config": {"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2},
        "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000.0},
    },
    "deepseek_v2": {"rope_scaling": _YARN, "n_routed_experts": 4, "num_experts_per_tok": 2},
    "exaone4": {"sliding_window": 8, "sliding_window_pattern": "LG", "layer_types": _ALTERNATING},
    "exaone_moe": {"sliding_window": 8, "layer_types": _ALTERNATING, "is_moe_layer": [False, True]},
    "gear": {"layer_types": ["conv_mixer", "full_attention"], "sliding_window": 8},
    "gemma3": {"text_config": {"sliding_window": 8, "sliding_window_pattern": 2}},
    "gemma3_text": {"sliding_window": 8, "sliding_window_pattern": 2},
    "gemma3n": {
        "text_config": {
            "num_kv_shared_layers": 1,
            "num_hidden_layers": 3,
            "vocab_size_per_layer_input": 256,
            "sliding_window": 8,
            "rope_local_base_freq": 10000.0,
            "final_logit_softcapping": 30.0,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
            "activation_sparsity_pattern": [0.0, 0.0, 0.0],
            "hidden_size_per_layer_input": 16,
            "altup_num_inputs": 2,
            "altup_coef_clip": 120.0,
            "altup_correct_scale": True,
            "altup_active_idx": 0,
            "laurel_rank": 8,
        }
    },
    "gemma4": {
        "text_config": {
            "global_head_dim": 16,
            "num_kv_shared_layers": 0,
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 256,
            "sliding_window": 8,
            "sliding_window_pattern": 2,
        }
    },
    "gemma4_text": {
        "global_head_dim": 16,
        "num_kv_shared_layers": 0,
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": 256,
        "sliding_window": 8,
        "sliding_window_pattern": 2,
    },
    "glm_moe_dsa": {
        "index_head_dim": 16,
        "index_n_heads": 2,
        "index_topk": 8,
        "rope_parameters": _ROPE,
        **_MLA,
    },
    "gpt_bigcode": {"n_inner": 128},
    "gptj": {"rotary_dim": 8},
    "hunyuan": {
        "use_mixed_mlp_moe": True,
        "num_shared_expert": 1,
        "use_cla": True,
        "cla_share_factor": 2,
        "rope_scaling": {"alpha": 1000.0, "factor": 1.0, "type": "dynamic"},
    },
    "jamba": {
        "attn_layer_offset": 1,
        "attn_layer_period": 2,
        "expert_layer_offset": 1,
        "expert_layer_period": 2,
        "mamba_d_conv": 4,
        "mamba_d_state": 16,
        "mamba_expand": 2,
    },
    "kimi_k3": {
        "text_config": {
            "model_type": "kimi_linear",
            "linear_attn_config": {
                "num_heads": 4,
                "head_dim": 16,
                "kda_layers": [1],
                "short_conv_kernel_size": 4,
            },
            "num_experts": 4,
            "num_experts_per_token": 2,
            "moe_intermediate_size": 32,
            "num_shared_experts": 1,
            "kv_lora_rank": 16,
            "v_head_dim": 16,
            **_MLA,
        }
    },
    "kimi_linear": {
        "linear_attn_config": {"num_heads": 4, "head_dim": 16, "kda_layers": [1]},
        "num_experts": 4,
        **_MLA,
    },
    "lfm2-vl": {"text_config": {"model_type": "lfm2", **_LFM2}},
    "lfm2_moe": {
        "use_expert_bias": True,
        "num_dense_layers": 1,
        "conv_bias": False,
        "conv_L_cache": 3,
        "layer_types": ["conv", "full_attention"],
    },
    "llama4": {
        "text_config": {
            "model_type": "llama4",
            "num_hidden_layers": 4,  # its caches: chunked but every fourth layer
            "attention_chunk_size": 8,
            "interleave_moe_layer_step": 2,
            "intermediate_size_mlp": 128,
            "num_local_experts": 2,
            "num_experts_per_tok": 1,
            "use_qk_norm": True,
        }
    },
    "llama4_text": {"intermediate_size_mlp": 128, "no_rope_layers": [1, 0]},
    "longcat_flash": {
        "attention_method": "MLA",
        "zero_expert_type": "identity",
        "zero_expert_num": 2,
        "mla_scale_q_lora": True,
        "mla_scale_kv_lora": True,
        "moe_topk": 2,
        **_MLA,
    },
    "longcat_flash_ngram": {
        "ngram_vocab_size_ratio": 1,
        "zero_expert_num": 2,
        "mla_scale_q_lora": True,
        "mla_scale_kv_lora": True,
        "moe_topk": 2,
        **_MLA,
    },
    "mamba": {"state_size": 16, "conv_kernel": 4, "use_conv_bias": True, "time_step_rank": 8},
    "mellum": {
        "layer_types": _ALTERNATING,
        "sliding_window": 8,
        "rope_parameters": {"sliding_attention": _ROPE, "full_attention": _ROPE},
    },
    "mimo_v2_flash": {
        "hybrid_layer_pattern": [1, 0],
        "moe_layer_freq": [0, 1],
        "add_swa_attention_sink_bias": True,
        "add_full_attention_sink_bias": False,
        "sliding_window_size": 8,
        "swa_rope_theta": 10000.0,
        "swa_num_attention_heads": 4,
        "swa_num_key_value_heads": 2,
        "swa_head_dim": 16,
        "swa_v_head_dim": 16,
    },
    "minicpm": {"dim_model_base": HIDDEN, "scale_depth": 1.4, "scale_emb": 12.0},
    "minicpm3": {
        "dim_model_base": HIDDEN,
        "scale_depth": 1.4,
        "scale_emb": 12.0,
        "rope_scaling": {"original_max_position_embeddings": 4096},
        **_MLA,
    },
    "minimax": {"rotary_dim": 8},
    "ministral3": {"rope_parameters": _MISTRAL_ROPE, "tie_word_embeddings": False},
    "mistral4": {"rope_parameters": _MISTRAL_ROPE, **_MLA},
    "muse_spark": {
        "audio_config": {"out_hidden_size": HIDDEN},  # transformers checks it
        "text_config": {
            "post_norm_eps": 1e-5,
            "rope_parameters": _ROPE,
            "layer_rope_theta": [10000.0, 10000.0],
            "layer_types": _ALTERNATING,
            "sliding_window": 8,
            "final_logit_softcapping": 30.0,
            "output_multiplier": 1.0,
            "num_local_experts": 4,
            "num_shared_experts": 0,  # mlx-lm implements its sparse layers only
            "moe_hidden_size": 32,
        },
    },
    "nemotron-nas": {
        "block_configs": [
            {
                "attention": {"n_heads_in_group": 2, "no_op": False, "replace_with_linear": False},
                "ffn": {"ffn_mult": 1.0, "no_op": False, "replace_with_linear": False},
            }
        ]
        * LAYERS,
    },
    "olmo3": {"sliding_window": 8, "layer_types": _ALTERNATING},
    "olmo_hybrid": {
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        "linear_allow_neg_eigval": True,
        "layer_types": ["linear_attention", "full_attention"],
    },
    "openelm": {
        "num_transformer_layers": LAYERS,
        "ffn_dim_divisor": 16,
        "num_query_heads": [4, 4],
        "num_kv_heads": [2, 2],
        "ffn_multipliers": [1.0, 2.0],
        "normalize_qk_projections": True,
    },
    "phi3small": {
        "dense_attention_every_n_layers": 2,
        "ff_intermediate_size": 128,
        "gegelu_limit": 20.0,
    },
    "phixtral": {"rotary_dim": 8, "num_vocab": 3456},
    "plamo": {"n_shared_head": 2},
    "qwen": {"kv_channels": 16},
    "qwen3_5_moe": {"text_config": _QWEN35_TEXT},
    "recurrent_gemma": {
        "conv1d_width": 3,
        "logits_soft_cap": 30.0,
        "attention_window_size": 8,
        "block_types": ["recurrent", "attention"],
    },
    "rwkv7": {
        "a_low_rank_dim": 8,
        "v_low_rank_dim": 8,
        "gate_low_rank_dim": 8,
        "decay_low_rank_dim": 8,
    },
    "spark2_5": {
        "sliding_window": 8,
        "layer_types": _ALTERNATING,
        "rope_parameters": {"sliding_attention": _ROPE, "full_attention": _ROPE},
    },
    "step3p5": {
        "num_attention_groups": 2,
        "rope_theta": [10000.0, 10000.0],
        "sliding_window": 8,
        "layer_types": ["full_attention", "sliding_attention"],
        "partial_rotary_factors": [0.5, 1.0],
        "attention_other_setting": {"num_attention_heads": 4, "num_attention_groups": 2},
        "moe_num_experts": 4,
        "moe_top_k": 2,
        "moe_intermediate_size": 32,
        "share_expert_dim": 32,
        "moe_layers_enum": "1",
    },
}


# The architecture whose arguments a wrapper's `text_config` holds, where its module names none.
_TEXT_OF = {
    "qwen3_5_moe": "qwen3_5",
    "gemma3": "gemma3_text",
    "gemma4": "gemma4_text",
    "lfm2-vl": "lfm2",
    "mistral3": "llama",
    "pixtral": "llama",
    "qwen2_vl": "qwen2",
    "qwen3_vl": "qwen3",
    "qwen3_vl_moe": "qwen3_moe",
}


def _module(model_type: str) -> Any:
    return importlib.import_module(f"mlx_lm.models.{model_type}")


def _text_args(model_type: str) -> Any:
    """The arguments class of a wrapper's `text_config`."""
    module = _module(_TEXT_OF.get(model_type, model_type))
    for name in ("TextModelArgs", "TextConfig", "TextArgs"):
        if hasattr(module, name):
            return getattr(module, name)
    return module.ModelArgs


def _filled(args_class: Any, vocab_size: int) -> dict[str, Any]:
    """`_SIZES` and `_REQUIRED` for the fields `args_class` declares."""
    config: dict[str, Any] = {}
    for f in dataclasses.fields(args_class):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name in _SIZES:
            config[f.name] = _SIZES[f.name]
        elif required and f.name in _REQUIRED:
            config[f.name] = _REQUIRED[f.name]
        elif f.name in ("vocab_size", "n_vocab", "vocabulary_size"):
            config[f.name] = vocab_size
    return config


def zoo_config(model_type: str, vocab_size: int) -> dict[str, Any]:
    """The config.json of `model_type`'s zoo model."""
    args_class = _module(model_type).ModelArgs
    config: dict[str, Any] = {"model_type": model_type, **_filled(args_class, vocab_size)}
    extra = dict(ARCHITECTURES.get(model_type, {}))
    if "text_config" in {f.name for f in dataclasses.fields(args_class)}:
        text = _filled(_text_args(model_type), vocab_size)
        config["text_config"] = {"model_type": model_type, **text, **extra.pop("text_config", {})}
    return config | extra


def build_zoo_model(
    model_type: str, out: Path, *, seed: int = 0, overrides: dict[str, Any] | None = None
) -> Path:
    """Writes `model_type`'s zoo model (config.json, model.safetensors, tokenizer) into `out`;
    `overrides`: what to set beyond the zoo's config (a window, say)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import _get_classes

    base = json.loads((BUNDLED_MODEL / "config.json").read_text())
    config = zoo_config(model_type, base["vocab_size"]) | (overrides or {})
    config["eos_token_id"] = base.get("eos_token_id")
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (BUNDLED_MODEL / name).exists():
            shutil.copy(BUNDLED_MODEL / name, out / name)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    mx.random.seed(seed)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    size = sum(v.size for _, v in tree_flatten(model.parameters()))  # lazy: nothing made yet
    if size > MAX_PARAMETERS:
        raise ValueError(f"{model_type}'s zoo model has {size:,} parameters: a size not set")
    mx.eval(model.parameters())
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights)
    return out


# Architectures the engine refuses at load (`model.UnservableModelError`), with a word of the
# reason its message gives: mlx-lm cannot load or run them here.
REFUSED = {
    "bitnet": "No Metal back-end",  # a Metal-only kernel
    "muse_spark": "No Metal back-end",  # a Metal-only kernel
    "gear": "layer_types",  # transformers 5 rejects its config's layer types ("conv_mixer")
    "olmo": "a package it needs is missing",  # mlx-lm's module exits without ai2-olmo
    "prism_hadamard_qwen35": "Hadamard pack",  # weights only as a 2-bit Hadamard pack
    "phi3small": "segfault",  # crashes MLX on a CPU: refused there (architectures.py)
}


# The same, as the docs' table says it (tools/zoo_table.py).
REFUSED_WHY = {
    "bitnet": "its kernels are Metal-only: no other device runs it",
    "muse_spark": "its kernels are Metal-only: no other device runs it",
    "gear": "transformers 5 rejects its config's layer types (`conv_mixer`) as mlx-lm loads "
    "the tokenizer",
    "olmo": "mlx-lm's module exits unless the `ai2-olmo` package is installed",
    "prism_hadamard_qwen35": "mlx-lm loads it only as a 2-bit Hadamard weight pack",
    "phi3small": "on a CPU only: its block-sparse attention crashes MLX (a segfault) on a "
    "16-token prompt",
}


# Architectures served, but not 4-bit: mlx-lm 0.32 cannot quantize them (the zoo's quantized
# path skips them with this reason; the docs' table names them).
NOT_QUANTIZED = {
    "afm7": "mlx-lm 0.32 cannot quantize afm7: its `FusedLinear.to_quantized` takes no "
    "`mode`, which `nn.quantize` passes",
}


def text_architectures() -> list[str]:
    """Every text `model_type` mlx-lm ships: its `mlx_lm.models` modules that define a model
    and its arguments (olmo's, which exits on import without its own package, included)."""
    import pkgutil

    import mlx_lm.models

    found = []
    for module in pkgutil.iter_modules(mlx_lm.models.__path__):
        if module.name == "olmo":
            found.append(module.name)
            continue
        try:
            loaded = _module(module.name)
        except Exception:
            continue
        if hasattr(loaded, "Model") and hasattr(loaded, "ModelArgs"):
            found.append(module.name)
    return sorted(found)


def write_unbuildable(model_type: str, out: Path) -> Path:
    """A folder of `model_type` mlx-lm cannot build from random weights (its config and the
    tokenizer, no weights): what loading it must refuse."""
    base = json.loads((BUNDLED_MODEL / "config.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (BUNDLED_MODEL / name).exists():
            shutil.copy(BUNDLED_MODEL / name, out / name)
    config = {"model_type": model_type, "vocab_size": base["vocab_size"]}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    import mlx.core as mx

    # A weights file, so that mlx-lm goes on to its architecture.
    mx.save_safetensors(str(out / "model.safetensors"), {"unused": mx.zeros((1,))})
    return out


def quantize_zoo_model(src: Path, out: Path, bits: int = 4) -> Path:
    """`src` quantized as `mlx_lm.convert -q` quantizes (group 64) into `out`."""
    from mlx_lm import load
    from mlx_lm.utils import quantize_model, save

    model, tokenizer = load(str(src))[:2]
    config = json.loads((src / "config.json").read_text())
    model, config = quantize_model(model, config, 64, bits)
    save(out, src, model, tokenizer, config)
    return out
