"""Which models the slots hold: a growing KV cache or one sliding window per layer."""

from __future__ import annotations

from typing import Any

from mlx_responses.service.engine.mlx_lm_compat import KVCache, RotatingKVCache, make_prompt_cache


def layer_windows(model: Any) -> list[int | None]:
    """The window each layer of `model` attends over (None: every position, a plain cache).

    Windows may differ between layers (gemma3's, gpt-oss's sliding layers beside full ones)
    where the architecture declares them (its class's `make_cache`): it then builds each
    layer kind's mask from a cache of that kind, as each slot view answers for its own layer.
    Raises ValueError for what slots cannot serve: layers sharing a cache, a window that
    keeps its first tokens, recurrent state, chunked attention, cache lists, any other cache,
    and windows that differ on an architecture that builds one mask for all its layers (a
    layout patched onto it)."""
    caches = make_prompt_cache(model)
    if len(caches) != len(model.layers):
        # gemma3n's, gemma4's later layers read an earlier layer's keys: no slot of their own.
        raise ValueError("its layers share caches")
    windows: list[int | None] = []
    for cache in caches:
        if type(cache) is KVCache:
            windows.append(None)
        elif type(cache) is RotatingKVCache and cache.keep == 0:
            windows.append(int(cache.max_size))
        else:
            raise ValueError(
                "its layers need caches other than growing ones or sliding windows "
                f"({type(cache).__name__})"
            )
    if len(set(windows)) > 1 and not _declares_its_caches(model):
        raise ValueError(
            "its layers' windows differ, and its architecture builds one mask for all of them"
        )
    return windows


def _declares_its_caches(model: Any) -> bool:
    """Whether `model`'s architecture (its class, not the instance) builds its caches."""
    return any("make_cache" in vars(cls) for cls in type(model).__mro__)


def slots_serve(model: Any) -> bool:
    """Whether `SlotScheduler` serves `model` (see `layer_windows`)."""
    try:
        layer_windows(model)
    except ValueError:
        return False
    return True
