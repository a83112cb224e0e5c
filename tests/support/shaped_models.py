"""Tiny random models shaped as those whose caches cannot be trimmed back: a Qwen3.5 (gated delta
layers' recurrent state beside attention), a gpt-oss (128-token rotating windows beside full
layers) and a Gemma 3 text model (rotating windows beside a full layer). Built from the zoo's
configs (`tests/support/zoo.py`: hidden 64, 2 layers, the bundled tokenizer) with their windows
set; for the prompt cache's checkpoints (`tests/engine/test_prompt_checkpoints.py`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.zoo import TOKENIZER_FILES, zoo_config

# What each shape sets beyond the zoo's config.
SHAPES: dict[str, dict[str, Any]] = {
    "qwen3_5": {},  # layers: gated delta (ArraysCache), then full attention
    "gpt_oss": {
        "sliding_window": 128,  # gpt-oss's own
        "layer_types": ["sliding_attention", "full_attention"],
    },
    "gemma3_text": {"sliding_window": 64, "sliding_window_pattern": 2},
}


def build_shaped(model_type: str, out: Path, *, seed: int = 0) -> Path:
    """Writes `model_type`'s shaped model (config.json, model.safetensors, tokenizer) in `out`."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import _get_classes

    base = json.loads((BUNDLED_MODEL / "config.json").read_text())
    config = zoo_config(model_type, base["vocab_size"]) | SHAPES[model_type]
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
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out
