"""A processed multimodal prompt as the runtime hands it over, and the encoder's counters."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class VisionInputs:
    """A processed multimodal prompt: the processor's arrays and each image's content hash."""

    pixel_values: np.ndarray | None
    image_grid_thw: np.ndarray | None  # Qwen-VL style: one (t, h, w) row per image
    image_keys: tuple[str, ...]
    extra: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class VisionCacheStats:
    """Image-encoding cache counters (read by /metrics)."""

    hits: int = 0
    misses: int = 0
    encode_seconds: float = 0.0  # spent in the vision tower (misses)
    tower_calls: int = 0  # calls of the tower: images admitted together share one
    entries: int = 0
    bytes: int = 0  # the cached encodings' (`ImageEncoder.nbytes`)
