"""Builds a tiny random-weight Qwen2-VL or Qwen2.5-VL in the mlx-vlm folder layout: nothing is
downloaded.

The language side is the bundled model's tokenizer with Qwen2-VL's three vision tokens added
(`<|vision_start|>`, `<|image_pad|>`, `<|vision_end|>`); its chat template renders an image part
as those three tokens, as Qwen2-VL's own template does. The vision tower is two blocks of width
32 over 14-pixel patches, and the processor (mlx-vlm's numpy Qwen-VL image processor) resizes
every image to between 28x28 and 112x112 pixels: 1 to 16 image tokens per image.

Qwen2.5-VL (`family="qwen2_5_vl"`) has the same language model and tokens; its tower reorders an
image's patches by window and attends within each window but in its full-attention blocks: here
windows of 2x2 image tokens (`WINDOW` pixels a side), its first block windowed, its second full,
so every image larger than 56x56 pixels is cut into several windows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.random_model import TOKENIZER_FILES, _end_ids

VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
IMAGE_PART = "<|vision_start|><|image_pad|><|vision_end|>"
PATCH = 14
MERGE = 2
MIN_PIXELS = (PATCH * MERGE) ** 2  # one image token
MAX_PIXELS = (PATCH * MERGE * 4) ** 2  # 16 image tokens
WINDOW = PATCH * MERGE * 2  # Qwen2.5-VL: a window is 2x2 image tokens
# The media limits of the tests' vision stack (tests/conftest.py `vlm_stack`).
MAX_MEDIA_BYTES = 64 * 1024
MAX_IMAGE_PIXELS = 512 * 512
MEDIA_LIMITS = {"max_media_bytes": MAX_MEDIA_BYTES, "max_image_pixels": MAX_IMAGE_PIXELS}


def build_random_vlm(
    out: Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    vision_width: int = 32,
    vision_depth: int = 2,
    seed: int = 0,
    max_pixels: int = MAX_PIXELS,
    tokenizer_from: Path = BUNDLED_MODEL,
    family: str = "qwen2_vl",
) -> Path:
    """Writes config.json, model.safetensors, the tokenizer and the processor configs.
    `family`: "qwen2_vl" or "qwen2_5_vl" (its windowed tower)."""
    import importlib

    import mlx.core as mx
    from mlx.utils import tree_flatten

    module = importlib.import_module(f"mlx_vlm.models.{family}")

    out.mkdir(parents=True, exist_ok=True)
    base = json.loads((tokenizer_from / "config.json").read_text())
    ids = _write_tokenizer(tokenizer_from, out, base["vocab_size"])
    names = {"qwen2_vl": "Qwen2VL", "qwen2_5_vl": "Qwen2_5_VL"}
    config: dict[str, Any] = {
        "model_type": family,
        "architectures": [f"{names[family]}ForConditionalGeneration"],
        "hidden_size": hidden_size,
        "num_hidden_layers": layers,
        "intermediate_size": hidden_size * 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "vocab_size": base["vocab_size"],
        "max_position_embeddings": 4096,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
        "tie_word_embeddings": False,
        "eos_token_id": base.get("eos_token_id"),
        "bos_token_id": None,
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vision_config": {
            "model_type": family,
            "depth": vision_depth,
            "num_heads": 2,
            "in_channels": 3,
            "patch_size": PATCH,
            "spatial_patch_size": PATCH,
            "spatial_merge_size": MERGE,
            "temporal_patch_size": 2,
        },
    }
    if family == "qwen2_5_vl":
        config["vision_config"] |= {
            "hidden_size": vision_width,
            "intermediate_size": vision_width * 2,
            "out_hidden_size": hidden_size,
            "window_size": WINDOW,
            "fullatt_block_indexes": [1],
            "tokens_per_second": 2,
        }
    else:
        config["vision_config"] |= {
            "embed_dim": vision_width,
            "hidden_size": hidden_size,
            "mlp_ratio": 2,
        }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    image_processor = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": f"{names[family]}Processor",
        "patch_size": PATCH,
        "temporal_patch_size": 2,
        "merge_size": MERGE,
        "min_pixels": MIN_PIXELS,
        "max_pixels": max_pixels,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
    }
    (out / "preprocessor_config.json").write_text(json.dumps(image_processor, indent=2))
    (out / "video_preprocessor_config.json").write_text(json.dumps(image_processor, indent=2))
    (out / "processor_config.json").write_text(
        json.dumps({"processor_class": f"{names[family]}Processor"}, indent=2)
    )
    mx.random.seed(seed)
    model_config = module.ModelConfig.from_dict(json.loads(json.dumps(config)))
    model_config.text_config = module.TextConfig.from_dict(model_config.text_config)
    model_config.vision_config = module.VisionConfig.from_dict(config["vision_config"])
    model = module.Model(model_config)
    _never_end(model, sorted(_end_ids(tokenizer_from, config["eos_token_id"])))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out


def _write_tokenizer(
    source: Path,
    out: Path,
    vocab_size: int,
    added: tuple[str, ...] = VISION_TOKENS,
    image_part: str = IMAGE_PART,
) -> dict[str, int]:
    """The bundled tokenizer plus the vision tokens (`added`), at the next free ids (where the
    tokenizer puts added tokens whatever ids they claim), below the model's `vocab_size`; an
    image part renders as `image_part`."""
    for name in TOKENIZER_FILES:
        if name != "tokenizer.json" and (source / name).exists():
            (out / name).write_text((source / name).read_text())
    tokenizer = json.loads((source / "tokenizer.json").read_text())
    taken = [*tokenizer["model"]["vocab"].values(), *(t["id"] for t in tokenizer["added_tokens"])]
    free = max(taken) + 1
    assert free + len(added) <= vocab_size
    ids = {token: free + i for i, token in enumerate(added)}
    for token, token_id in ids.items():
        tokenizer["added_tokens"].append(
            {
                "id": token_id,
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        )
    (out / "tokenizer.json").write_text(json.dumps(tokenizer))
    special = json.loads((out / "tokenizer_config.json").read_text())
    for token, token_id in ids.items():
        special["added_tokens_decoder"][str(token_id)] = {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
    # An image part renders as the model's own spelling (Qwen2-VL: its three tokens).
    template: str = special["chat_template"]
    text_branch = "{%- elif part.text is defined and part.text is not none -%}"
    assert text_branch in template, "the bundled template changed: update random_vlm.py"
    special["chat_template"] = template.replace(
        text_branch,
        "{%- elif part.type is defined and part.type == 'image' -%}"
        "{{- '" + image_part + "' -}}\n" + text_branch,
        1,
    )
    (out / "tokenizer_config.json").write_text(json.dumps(special, indent=2))
    return ids


def _never_end(model: Any, token_ids: list[int]) -> None:
    """The end tokens' head rows are zero: logit 0 against random ones, so greedy decoding
    (the tests') rarely ends early. Unlike tests/support/random_model.py it promises nothing."""
    import mlx.core as mx

    lm = model.language_model
    # A tied head is the token embeddings (their rows then read 0 as inputs too).
    owner = lm.lm_head if "lm_head" in lm else lm.model.embed_tokens
    head = owner.weight
    head[mx.array(token_ids)] = 0.0
    owner.weight = head


def end_at_once(folder: Path, tokenizer_from: Path = BUNDLED_MODEL) -> Path:
    """The model at `folder` rewritten to end its turn at once, whatever it is shown (for a
    client that treats a turn cut at its token cap as an error): every embedding the same,
    the layers adding nothing, and only the end tokens' head rows set, so the end token's
    logit is the hidden size and every other 0 (near certain, even at temperature 1)."""
    import mlx.core as mx

    weights = mx.load(str(folder / "model.safetensors"))
    assert isinstance(weights, dict)
    config = json.loads((folder / "config.json").read_text())
    for name, value in weights.items():
        if name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
            weights[name] = mx.zeros_like(value)
    embed = "language_model.model.embed_tokens.weight"
    weights[embed] = mx.ones_like(weights[embed])
    head = mx.zeros_like(weights["language_model.lm_head.weight"])
    head[mx.array(sorted(_end_ids(tokenizer_from, config["eos_token_id"])))] = 1.0
    weights["language_model.lm_head.weight"] = head
    mx.save_safetensors(str(folder / "model.safetensors"), weights)
    return folder
