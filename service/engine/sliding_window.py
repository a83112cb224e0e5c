"""The sliding attention window a model's config declares, where mlx-lm's architecture omits it.

Qwen2 and Qwen3 configs (Hugging Face's) declare sliding-window attention with
`use_sliding_window`, `sliding_window` and `max_window_layers` (the layers below it attend to
everything), or with an explicit `layer_types` list. mlx-lm's qwen2 and qwen3 ignore both and
attend to every position. Where every layer slides, the window is one rotating KV cache of
`sliding_window` tokens per layer: mlx-lm's masks follow the cache, single and batched
(`RotatingKVCache`, `BatchRotatingKVCache`), so the model attends exactly as Hugging Face's
reference does. Architectures with their own `make_cache` (gemma3, llama with `layer_types`,
…) apply their windows themselves and are left alone.
"""

from __future__ import annotations

import logging
from typing import Any

from mlx import nn
from mlx_responses.service.engine.mlx_lm_compat import RotatingKVCache

log = logging.getLogger(__name__)

SLIDING = "sliding_attention"


def declared_window(config: dict[str, Any]) -> int | None:
    """The window every layer slides over, as the config declares it (None: no window for all)."""
    window = config.get("sliding_window")
    layers = config.get("num_hidden_layers")
    if not isinstance(window, int) or window < 1 or not isinstance(layers, int):
        return None
    types = config.get("layer_types")
    if isinstance(types, list):
        return window if len(types) == layers and all(t == SLIDING for t in types) else None
    if config.get("use_sliding_window") is not True:
        return None
    full = config.get("max_window_layers")
    return window if isinstance(full, int) and full <= 0 else None


def partly_sliding(config: dict[str, Any]) -> bool:
    """Whether the config slides some layers but not all (one mask cannot serve both)."""
    if declared_window(config) is not None or not isinstance(config.get("sliding_window"), int):
        return False
    types = config.get("layer_types")
    if isinstance(types, list):
        return SLIDING in types
    return config.get("use_sliding_window") is True


def apply_window(model: nn.Module, config: dict[str, Any], name: str) -> int | None:
    """Gives `model` rotating caches of its declared window; the window applied (None: none)."""
    if hasattr(model, "make_cache"):
        return None  # the architecture builds its own caches, windows included
    window = declared_window(config)
    if window is None:
        if partly_sliding(config):
            log.warning(
                "%s declares sliding-window attention for some layers only; mlx-lm's %s "
                "attends to every position in all of them",
                name,
                config.get("model_type"),
            )
        return None
    layers = len(model.layers)

    def make_cache() -> list[Any]:
        return [RotatingKVCache(max_size=window, keep=0) for _ in range(layers)]

    model.make_cache = make_cache
    log.info("%s attends over a sliding window of %d tokens (its config)", name, window)
    return window
