"""Tells a model that takes per-row inputs beyond token ids which rows its next forward runs.

A vision model's hybrid language side (`vision/hybrid.py`) keeps each sequence's input
embeddings and M-RoPE positions by the generator's uid; mlx-lm's batches call the model with
token ids alone. Before a forward (a prefill chunk, a sequence's first step, a decode step) the
batch names its rows and where each stands: the tokens its cache holds. A text model has no
`feed`: nothing is said.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def feed(model: Any, uids: Sequence[int], tokens: Sequence[Sequence[int]]) -> None:
    """Rows `uids` run next, each past the `tokens` its cache holds."""
    hook = getattr(model, "feed", None)
    if hook is not None:
        hook(list(uids), [len(t) for t in tokens])
