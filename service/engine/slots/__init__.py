"""Our scheduler: continuous batching over fixed KV slots (`--engine slots`)."""

from mlx_responses.service.engine.slots.fit import layer_windows, slots_serve
from mlx_responses.service.engine.slots.scheduler import SlotScheduler

__all__ = ["SlotScheduler", "layer_windows", "slots_serve"]
