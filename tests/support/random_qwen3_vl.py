"""Builds a tiny random-weight Qwen3-VL in the mlx-vlm folder layout: nothing is downloaded.

Its tokenizer and chat template are random_vlm.py's (the bundled model's, with the Qwen-VL vision
tokens: an image part renders as `<|vision_start|><|image_pad|><|vision_end|>`); its processor is
mlx-vlm's numpy Qwen3-VL one (16-pixel patches merged 2x2: one image token per 32x32 pixels, 1 to
16 per image). The vision tower's two blocks both feed "deepstack" features, which the language
model adds to the image tokens' hidden states after its first two layers (of three), so a
prefill that drops them decodes otherwise.

Qwen3-VL-MoE (`family="qwen3_vl_moe"`) is the same model with mixture-of-experts MLPs in its
language model: here 4 experts, 2 per token, in every layer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.random_model import _end_ids
from tests.support.random_vlm import _never_end, _write_tokenizer

PATCH = 16
MERGE = 2
MIN_PIXELS = (PATCH * MERGE) ** 2  # one image token
MAX_PIXELS = (PATCH * MERGE * 4) ** 2  # 16 image tokens


def build_random_qwen3_vl(
    out: Path,
    *,
    hidden_size: int = 64,
    layers: int = 3,
    vision_width: int = 32,
    seed: int = 0,
    tokenizer_from: Path = BUNDLED_MODEL,
    family: str = "qwen3_vl",
) -> Path:
    """Writes config.json, model.safetensors, the tokenizer and the processor configs.
    `family`: "qwen3_vl" or "qwen3_vl_moe"."""
    import importlib

    module = importlib.import_module(f"mlx_vlm.models.{family}")

    out.mkdir(parents=True, exist_ok=True)
    base = json.loads((tokenizer_from / "config.json").read_text())
    ids = _write_tokenizer(tokenizer_from, out, base["vocab_size"])
    name = {"qwen3_vl": "Qwen3VL", "qwen3_vl_moe": "Qwen3VLMoe"}[family]
    config: dict[str, Any] = {
        "model_type": family,
        "architectures": [f"{name}ForConditionalGeneration"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vocab_size": base["vocab_size"],
        "eos_token_id": base.get("eos_token_id"),
        "tie_word_embeddings": False,
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
            "max_position_embeddings": 4096,
            "rope_theta": 5000000.0,
            # Interleaved M-RoPE over the head's 8 frequencies: time, height, width.
            "rope_scaling": {
                "rope_type": "default",
                "mrope_section": [2, 3, 3],
                "mrope_interleaved": True,
            },
            "tie_word_embeddings": False,
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
            "num_position_embeddings": 16,  # a 4x4 grid, interpolated to each image's
            "deepstack_visual_indexes": [0, 1],
        },
    }
    if family == "qwen3_vl_moe":
        config["text_config"] |= {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "moe_intermediate_size": hidden_size,
            "norm_topk_prob": True,
        }
    write_model(out, module, config, seed=seed, tokenizer_from=tokenizer_from)
    return out


def write_model(
    out: Path, module: Any, config: dict[str, Any], *, seed: int, tokenizer_from: Path
) -> None:
    """Writes `config`, the Qwen-VL processor configs and random weights of mlx-vlm's `module`
    (seeded, its end tokens never sampled) into `out`."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    (out / "config.json").write_text(json.dumps(config, indent=2))
    image_processor = {
        "image_processor_type": "Qwen2VLImageProcessorFast",
        "processor_class": "Qwen3VLProcessor",
        "patch_size": PATCH,
        "temporal_patch_size": 2,
        "merge_size": MERGE,
        "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    (out / "preprocessor_config.json").write_text(json.dumps(image_processor, indent=2))
    (out / "video_preprocessor_config.json").write_text(json.dumps(image_processor, indent=2))
    (out / "processor_config.json").write_text(
        json.dumps({"processor_class": "Qwen3VLProcessor"}, indent=2)
    )
    mx.random.seed(seed)
    model_config = module.ModelConfig.from_dict(json.loads(json.dumps(config)))
    model = module.Model(model_config)
    _never_end(model, sorted(_end_ids(tokenizer_from, config["eos_token_id"])))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
