"""Builds a tiny random-weight Mistral 3 (Mistral Small 3.1/3.2: Pixtral vision tower, a patch
merger and a Mistral language side) in the mlx-vlm folder layout: nothing is downloaded.

The tokenizer is the bundled model's with Pixtral's image tokens added; its chat template renders
an image part as `[IMG]`, which the processor expands into the image's rows of `[IMG]` tokens
(one per 2x2 merged 14-pixel patches), each row but the last followed by `[IMG_BREAK]`, and an
`[IMG_END]`. The processor keeps an image's aspect: it fits the image in `LONGEST` pixels and
rounds each side up to a multiple of 28, so a 40x60 picture is 2 rows of 3 image tokens.

`text="ministral3"` gives Ministral 3's language side instead (an attention scale read from the
first row's cache offset, per-layer attention types): a model the slots do not batch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.random_model import _end_ids
from tests.support.random_vlm import _never_end, _write_tokenizer

IMAGE, BREAK, END = "[IMG]", "[IMG_BREAK]", "[IMG_END]"
PATCH = 14
MERGE = 2
LONGEST = 112  # pixels: an image's longest side at most (4 rows or columns of image tokens)


def build_random_mistral3(
    out: Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    vision_width: int = 32,
    seed: int = 0,
    text: str = "mistral",
    tokenizer_from: Path = BUNDLED_MODEL,
) -> Path:
    """Writes config.json, model.safetensors, the tokenizer and the processor configs."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models import mistral3

    out.mkdir(parents=True, exist_ok=True)
    base = json.loads((tokenizer_from / "config.json").read_text())
    ids = _write_tokenizer(tokenizer_from, out, base["vocab_size"], (IMAGE, BREAK, END), IMAGE)
    text_config: dict[str, Any] = {
        "model_type": text,
        "hidden_size": hidden_size,
        "head_dim": hidden_size // 4,
        "num_hidden_layers": layers,
        "intermediate_size": hidden_size * 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "vocab_size": base["vocab_size"],
        "max_position_embeddings": 4096,
        "rope_theta": 1000000000.0,
        "tie_word_embeddings": False,
    }
    if text == "ministral3":
        text_config["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": 1000000.0,
            "llama_4_scaling_beta": 0.1,
            "original_max_position_embeddings": 16384,
        }
    config: dict[str, Any] = {
        "model_type": "mistral3",
        "architectures": ["Mistral3ForConditionalGeneration"],
        "image_token_index": ids[IMAGE],
        "spatial_merge_size": MERGE,
        "vision_feature_layer": -1,
        "multimodal_projector_bias": False,
        "vocab_size": base["vocab_size"],
        "eos_token_id": base.get("eos_token_id"),
        "text_config": text_config,
        "vision_config": {
            "model_type": "pixtral",
            "num_hidden_layers": 2,
            "hidden_size": vision_width,
            "head_dim": vision_width // 2,
            "intermediate_size": vision_width * 2,
            "num_attention_heads": 2,
            "image_size": LONGEST,
            "patch_size": PATCH,
            "num_channels": 3,
            "rope_theta": 10000.0,
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    image_processor = {
        "image_processor_type": "PixtralImageProcessor",
        "processor_class": "PixtralProcessor",
        "size": {"longest_edge": LONGEST},
        "patch_size": {"height": PATCH, "width": PATCH},
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
    }
    (out / "preprocessor_config.json").write_text(json.dumps(image_processor, indent=2))
    processor = {
        "processor_class": "PixtralProcessor",
        "patch_size": PATCH,
        "spatial_merge_size": MERGE,
        "image_token": IMAGE,
        "image_break_token": BREAK,
        "image_end_token": END,
    }
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2))
    mx.random.seed(seed)
    model_config = mistral3.ModelConfig.from_dict(json.loads(json.dumps(config)))
    model_config.text_config = mistral3.TextConfig.from_dict(text_config)
    model_config.vision_config = mistral3.VisionConfig.from_dict(config["vision_config"])
    model = mistral3.Model(model_config)
    _never_end(model, sorted(_end_ids(tokenizer_from, config["eos_token_id"])))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out
