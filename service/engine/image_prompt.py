"""An image prompt as the scheduler protocol carries it (`scheduler.Admission`): its processed
images for a scheduler that runs the vision tower itself (`VisionInputs`), its rotary positions
where they are not each token's index (`RowPositions`: M-RoPE, computed in
`vision/positions.py`), and a Qwen3-VL prompt's deepstack features of its image tokens
(`Deepstack`: cut into prefill chunks in `vision/deepstack.py`). Data alone, below the seam:
the schedulers and the vision side both stand on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np


@dataclass(frozen=True)
class VisionInputs:
    """A processed multimodal prompt: the processor's arrays and each image's content hash."""

    pixel_values: np.ndarray | None
    image_grid_thw: np.ndarray | None  # Qwen-VL style: one (t, h, w) row per image
    image_keys: tuple[str, ...]
    extra: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class RowPositions:
    """One sequence's positions: the prompt's ids while they differ from index + delta
    (`table`, [3, n]: up to its last image token; None for text alone), `delta` past them."""

    table: np.ndarray | None = None
    delta: int = 0

    @property
    def plain(self) -> bool:
        """Each token at its index: what a text model's cache offset gives."""
        return self.table is None and self.delta == 0

    def span(self, start: int, length: int) -> np.ndarray:
        """[3, length]: the ids of tokens start..start+length-1."""
        out = np.empty((3, length), np.int32)
        held = 0 if self.table is None else max(0, min(length, self.table.shape[1] - start))
        if held:
            assert self.table is not None
            out[:, :held] = self.table[:, start : start + held]
        if held < length:
            out[:, held:] = np.arange(start + held, start + length, dtype=np.int32) + self.delta
        return out


TEXT = RowPositions()


@dataclass
class Deepstack:
    """A prompt's deepstack features from a prompt position on: `mask` (one per position,
    True at an image token) and `features` ([layers, image tokens, hidden], in order)."""

    mask: np.ndarray
    features: mx.array

    def __post_init__(self) -> None:
        # Image tokens before each position: where a chunk's features start.
        self._before = np.concatenate([[0], np.cumsum(self.mask)])

    def past(self, start: int) -> Deepstack:
        """These features from position `start` on (past what a prompt cache holds)."""
        return Deepstack(self.mask[start:], self.features[:, int(self._before[start]) :])

    def chunk(self, at: int, length: int) -> tuple[np.ndarray, mx.array | None]:
        """Positions at..at+length-1 (from this one's first): their mask, and the features
        of the image tokens among them (None: none)."""
        mask = self.mask[at : at + length]
        lo, hi = int(self._before[at]), int(self._before[min(at + length, len(self.mask))])
        return mask, self.features[:, lo:hi] if hi > lo else None
