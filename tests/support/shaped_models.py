"""Tiny random models shaped as those whose caches cannot be trimmed back: a Qwen3.5 (gated delta
layers' recurrent state beside attention), a gpt-oss (128-token rotating windows beside full
layers) and a Gemma 3 text model (rotating windows beside a full layer). Built from the zoo's
configs (`tests/support/zoo.py`: hidden 64, 2 layers, the bundled tokenizer) with their windows
set; for the prompt cache's checkpoints (`tests/engine/test_prompt_checkpoints.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.zoo import build_zoo_model

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
    return build_zoo_model(model_type, out, seed=seed, overrides=SHAPES[model_type])
