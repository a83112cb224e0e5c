"""A lone sequence decoded as mlx-lm's `generate_step` does, in front of another scheduler, or
sequences one at a time that way (`serial.py`)."""

from mlx_responses.service.engine.solo.scheduler import SoloScheduler
from mlx_responses.service.engine.solo.sequence import Handover, SoloSequence
from mlx_responses.service.engine.solo.serial import TextSerialScheduler

__all__ = ["Handover", "SoloScheduler", "SoloSequence", "TextSerialScheduler"]
