"""Builds a tiny random-weight Qwen3.5 VLM (mlx-vlm's `qwen3_5`) in the mlx-vlm folder layout:
nothing is downloaded.

Qwen3.5 as mlx-community ships it: a hybrid language model (gated-delta linear-attention layers,
whose cache is a recurrent state, beside full-attention layers with interleaved M-RoPE) under a
Qwen3-VL vision tower without deepstack features. Here 4 layers, every second one full attention
(`full_attention_interval` 2), hidden 64; the tokenizer, chat template and processor are
random_qwen3_vl.py's (an image part renders as `<|vision_start|><|image_pad|><|vision_end|>`; one
image token per 32x32 pixels, 1 to 16 per image).

Qwen3.5-MoE (`family="qwen3_5_moe"`) is the same model with mixture-of-experts MLPs (4 experts,
2 per token, and a gated shared expert) in every layer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.random_qwen3_vl import MERGE, PATCH, write_model
from tests.support.random_vlm import _write_tokenizer


def build_random_qwen3_5_vl(
    out: Path,
    *,
    hidden_size: int = 64,
    layers: int = 4,
    vision_width: int = 32,
    seed: int = 0,
    tokenizer_from: Path = BUNDLED_MODEL,
    family: str = "qwen3_5",
    full_attention_interval: int = 2,
    context: int = 4096,
    tied: bool = False,
) -> Path:
    """Writes config.json, model.safetensors, the tokenizer and the processor configs.
    `family`: "qwen3_5" or "qwen3_5_moe"; `full_attention_interval`: every how many layers one
    is full attention (Qwen3.5's own is 4); `context`: max_position_embeddings; `tied`: the
    output head is the token embeddings (as the small Qwen3.5s ship)."""
    import importlib

    module = importlib.import_module(f"mlx_vlm.models.{family}")

    out.mkdir(parents=True, exist_ok=True)
    base = json.loads((tokenizer_from / "config.json").read_text())
    ids = _write_tokenizer(tokenizer_from, out, base["vocab_size"])
    config: dict[str, Any] = {
        "model_type": family,
        "architectures": [
            {"qwen3_5": "Qwen3_5", "qwen3_5_moe": "Qwen3_5Moe"}[family] + "ForConditionalGeneration"
        ],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vocab_size": base["vocab_size"],
        "eos_token_id": base.get("eos_token_id"),
        "tie_word_embeddings": tied,
        "text_config": {
            "model_type": f"{family}_text",
            "hidden_size": hidden_size,
            "num_hidden_layers": layers,
            "intermediate_size": hidden_size * 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "rms_norm_eps": 1e-6,
            "vocab_size": base["vocab_size"],
            "max_position_embeddings": context,
            "eos_token_id": base.get("eos_token_id"),
            "full_attention_interval": full_attention_interval,
            "linear_num_value_heads": 4,
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_conv_kernel_dim": 4,
            "tie_word_embeddings": tied,
            # Interleaved M-RoPE over all of the head's 8 frequencies: time, height, width.
            "rope_parameters": {
                "type": "default",
                "mrope_section": [2, 3, 3],
                "rope_theta": 5000000.0,
                "partial_rotary_factor": 1.0,
            },
        },
        "vision_config": {
            "model_type": family,
            "depth": 2,
            "hidden_size": vision_width,
            "intermediate_size": vision_width * 2,
            "out_hidden_size": hidden_size,
            "num_heads": 2,
            "in_channels": 3,
            "patch_size": PATCH,
            "spatial_patch_size": PATCH,
            "spatial_merge_size": MERGE,
            "temporal_patch_size": 2,
            "num_position_embeddings": 16,
            "deepstack_visual_indexes": [],
        },
    }
    if family == "qwen3_5_moe":
        config["text_config"] |= {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": hidden_size,
            "shared_expert_intermediate_size": hidden_size,
            "norm_topk_prob": True,
        }
    write_model(out, module, config, seed=seed, tokenizer_from=tokenizer_from)
    return out
