"""OpenAI's presence and frequency penalties as mlx-lm logits processors."""

from __future__ import annotations

from mlx_responses.service.engine.mlx_lm_compat import make_frequency_penalty, make_presence_penalty
from mlx_responses.service.engine.requests import LogitsProcessor

# NOTE: mlx-lm's penalty processors look at a window of the most recent tokens (its default 20,
# the prompt's tail included at the start), not at the whole generated text as OpenAI describes.
PENALTY_WINDOW = 20


def penalty_processors(presence: float, frequency: float) -> list[LogitsProcessor]:
    """The processors for non-zero penalties (none at all keeps the batched fast path)."""
    processors: list[LogitsProcessor] = []
    if presence:
        processors.append(make_presence_penalty(presence, PENALTY_WINDOW))
    if frequency:
        processors.append(make_frequency_penalty(frequency, PENALTY_WINDOW))
    return processors
