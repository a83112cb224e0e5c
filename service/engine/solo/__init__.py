"""A lone sequence decoded as mlx-lm's `generate_step` does, in front of another scheduler."""

from mlx_responses.service.engine.solo.scheduler import SoloScheduler
from mlx_responses.service.engine.solo.sequence import Handover, SoloSequence

__all__ = ["Handover", "SoloScheduler", "SoloSequence"]
