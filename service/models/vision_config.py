"""Whether a model folder is a vision-language model (read before anything imports MLX)."""

from __future__ import annotations

import json
from pathlib import Path


def vision_folder(folder: Path) -> bool:
    """A config.json with a `vision_config` describes a VLM (Qwen-VL, Gemma 3, LLaVA, ...)."""
    config = json.loads((folder / "config.json").read_text())
    return isinstance(config.get("vision_config"), dict)
