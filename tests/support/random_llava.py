"""Builds a tiny random-weight LLaVA (llama language side, CLIP vision tower) in the mlx-vlm
folder layout: nothing is downloaded. A family the slots do not batch
(service/engine/vision/side.py `BATCHED`): its requests decode one at a time.

The tokenizer is the bundled model's with `<image>` added; its chat template renders an image
part as `<image>`, which LLaVA's processor expands into one `<image>` per patch of the 28x28
image the CLIP processor makes of every picture (4 image tokens).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.random_model import _end_ids
from tests.support.random_vlm import _never_end, _write_tokenizer

IMAGE_TOKEN = "<image>"
SIDE = 28  # pixels: every image is resized and cropped to SIDE x SIDE
PATCH = 14
IMAGE_TOKENS = (SIDE // PATCH) ** 2


def build_random_llava(
    out: Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    vision_width: int = 32,
    seed: int = 0,
    tokenizer_from: Path = BUNDLED_MODEL,
) -> Path:
    """Writes config.json, model.safetensors, the tokenizer and the processor configs."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models import llava

    out.mkdir(parents=True, exist_ok=True)
    base = json.loads((tokenizer_from / "config.json").read_text())
    ids = _write_tokenizer(tokenizer_from, out, base["vocab_size"], (IMAGE_TOKEN,), IMAGE_TOKEN)
    config: dict[str, Any] = {
        "model_type": "llava",
        "architectures": ["LlavaForConditionalGeneration"],
        "image_token_index": ids[IMAGE_TOKEN],
        "vision_feature_select_strategy": "default",
        "vision_feature_layer": -2,
        "vocab_size": base["vocab_size"],
        "eos_token_id": base.get("eos_token_id"),
        "text_config": {
            "model_type": "llama",
            "hidden_size": hidden_size,
            "num_hidden_layers": layers,
            "intermediate_size": hidden_size * 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-6,
            "vocab_size": base["vocab_size"],
            "max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
        },
        "vision_config": {
            "model_type": "clip_vision_model",
            "num_hidden_layers": 2,
            "hidden_size": vision_width,
            "intermediate_size": vision_width * 2,
            "num_attention_heads": 2,
            "image_size": SIDE,
            "patch_size": PATCH,
            "projection_dim": vision_width,
            "num_channels": 3,
            "layer_norm_eps": 1e-5,
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    image_processor = {
        "image_processor_type": "CLIPImageProcessor",
        "processor_class": "LlavaProcessor",
        "do_resize": True,
        "size": {"shortest_edge": SIDE},
        "do_center_crop": True,
        "crop_size": {"height": SIDE, "width": SIDE},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "do_convert_rgb": True,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(image_processor, indent=2))
    processor = {
        "processor_class": "LlavaProcessor",
        "patch_size": PATCH,
        "vision_feature_select_strategy": "default",
        "image_token": IMAGE_TOKEN,
        "num_additional_image_tokens": 1,
    }
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2))
    mx.random.seed(seed)
    model_config = llava.ModelConfig.from_dict(json.loads(json.dumps(config)))
    model_config.text_config = llava.TextConfig.from_dict(config["text_config"])
    model_config.vision_config = llava.VisionConfig.from_dict(config["vision_config"])
    model = llava.Model(model_config)
    _never_end(model, sorted(_end_ids(tokenizer_from, config["eos_token_id"])))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out
