"""Which models the slots hold: plain KV caches, or one sliding window on every layer."""

from __future__ import annotations

from typing import Any

from mlx_responses.service.engine.mlx_lm_compat import KVCache, RotatingKVCache, make_prompt_cache


def uniform_window(model: Any) -> int | None:
    """The sliding window every layer of `model` attends over (None: none, plain caches).

    Raises ValueError for what slots cannot serve: layers of different windows, sliding and
    full layers mixed, a window that keeps its first tokens, recurrent or other caches."""
    caches = make_prompt_cache(model)
    if all(type(c) is KVCache for c in caches):
        return None
    if all(type(c) is RotatingKVCache and c.keep == 0 for c in caches):
        windows = {c.max_size for c in caches}
        if len(windows) == 1:
            return int(windows.pop())
    raise ValueError("its layers need caches other than one growing or one sliding window")


def slots_serve(model: Any) -> bool:
    """Whether `SlotScheduler` serves `model` (see `uniform_window`)."""
    try:
        uniform_window(model)
    except ValueError:
        return False
    return True
