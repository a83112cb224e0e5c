"""Builds a tiny random-weight Gemma 3 (sliding-window language side, SigLIP vision tower) in the
mlx-vlm folder layout: nothing is downloaded. A family the slots do not batch (its language
model interleaves sliding-window layers and takes its own attention mask with the images):
its requests decode one at a time (service/engine/vision/serial.py).

The tokenizer is the bundled model's with Gemma 3's image tokens added; its chat template renders
an image part as `<start_of_image>`, which Gemma 3's processor expands into the image's
`IMAGE_TOKENS` soft tokens between `<start_of_image>` and `<end_of_image>`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.random_model import _end_ids
from tests.support.random_vlm import _never_end, _write_tokenizer

BOI, IMAGE, EOI = "<start_of_image>", "<image_soft_token>", "<end_of_image>"
SIDE = 28  # pixels: every image is resized to SIDE x SIDE
PATCH = 14
IMAGE_TOKENS = 4  # (SIDE // PATCH) ** 2 patches, pooled 1:1


def build_random_gemma3(
    out: Path,
    *,
    hidden_size: int = 64,
    layers: int = 3,
    vision_width: int = 32,
    seed: int = 0,
    tokenizer_from: Path = BUNDLED_MODEL,
) -> Path:
    """Writes config.json, model.safetensors, the tokenizer and the processor configs."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models import gemma3

    out.mkdir(parents=True, exist_ok=True)
    base = json.loads((tokenizer_from / "config.json").read_text())
    ids = _write_tokenizer(tokenizer_from, out, base["vocab_size"], (BOI, IMAGE, EOI), BOI)
    special = json.loads((out / "tokenizer_config.json").read_text())
    special["extra_special_tokens"] = {"boi_token": BOI, "image_token": IMAGE, "eoi_token": EOI}
    (out / "tokenizer_config.json").write_text(json.dumps(special, indent=2))
    config: dict[str, Any] = {
        "model_type": "gemma3",
        "architectures": ["Gemma3ForConditionalGeneration"],
        "image_token_index": ids[IMAGE],
        "boi_token_index": ids[BOI],
        "eoi_token_index": ids[EOI],
        "vocab_size": base["vocab_size"],
        "hidden_size": hidden_size,
        "pad_token_id": 0,
        "eos_token_id": base.get("eos_token_id"),
        "mm_tokens_per_image": IMAGE_TOKENS,
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": hidden_size,
            "num_hidden_layers": layers,
            "intermediate_size": hidden_size * 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "vocab_size": base["vocab_size"],
            "sliding_window": 8,
            "sliding_window_pattern": 2,
            "mm_tokens_per_image": IMAGE_TOKENS,
            "max_position_embeddings": 4096,
        },
        "vision_config": {
            "model_type": "siglip_vision_model",
            "num_hidden_layers": 2,
            "hidden_size": vision_width,
            "intermediate_size": vision_width * 2,
            "num_attention_heads": 2,
            "patch_size": PATCH,
            "image_size": SIDE,
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    image_processor = {
        "image_processor_type": "Gemma3ImageProcessor",
        "processor_class": "Gemma3Processor",
        "do_resize": True,
        "size": {"height": SIDE, "width": SIDE},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "do_convert_rgb": True,
        "do_pan_and_scan": False,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(image_processor, indent=2))
    processor = {"processor_class": "Gemma3Processor", "image_seq_length": IMAGE_TOKENS}
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2))
    mx.random.seed(seed)
    model_config = gemma3.ModelConfig.from_dict(json.loads(json.dumps(config)))
    model_config.text_config = gemma3.TextConfig.from_dict(config["text_config"])
    model_config.vision_config = gemma3.VisionConfig.from_dict(config["vision_config"])
    model = gemma3.Model(model_config)
    _never_end(model, sorted(_end_ids(tokenizer_from, config["eos_token_id"])))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out
