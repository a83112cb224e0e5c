"""OpenAI's presence and frequency penalties as mlx-lm logits processors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlx_responses.service.engine.mlx_lm_compat import make_frequency_penalty, make_presence_penalty
from mlx_responses.service.engine.requests import LogitsProcessor

# NOTE: mlx-lm's penalty processors look at a window of the most recent tokens (its default 20,
# the prompt's tail included at the start), not at the whole generated text as OpenAI describes.
PENALTY_WINDOW = 20

# Marks a processor whose logits are a function of the context it is given alone (a penalty, a
# logit bias), holding no state of its own: a verify can apply it at every drafted position.
CONTEXT_ONLY = "context_only"


def context_only(processor: Any) -> Any:
    """`processor`, marked `CONTEXT_ONLY`."""
    setattr(processor, CONTEXT_ONLY, True)
    return processor


def reads_context_only(processors: Sequence[Any]) -> bool:
    """Whether every one of `processors` is marked `CONTEXT_ONLY` (none: true)."""
    return all(getattr(p, CONTEXT_ONLY, False) for p in processors)


def penalty_processors(presence: float, frequency: float) -> list[LogitsProcessor]:
    """The processors for non-zero penalties (none at all keeps the batched fast path)."""
    processors: list[LogitsProcessor] = []
    if presence:
        processors.append(context_only(make_presence_penalty(presence, PENALTY_WINDOW)))
    if frequency:
        processors.append(context_only(make_frequency_penalty(frequency, PENALTY_WINDOW)))
    return processors
