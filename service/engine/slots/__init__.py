"""Our scheduler: continuous batching over fixed KV slots (`--engine slots`)."""

from mlx_responses.service.engine.slots.fit import slots_serve, uniform_window
from mlx_responses.service.engine.slots.scheduler import SlotScheduler
from mlx_responses.service.engine.slots.speculation import SlotSpeculation

__all__ = ["SlotScheduler", "SlotSpeculation", "slots_serve", "uniform_window"]
