"""Which configs declare a sliding window for every layer (Hugging Face's Qwen2/Qwen3 fields)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from mlx_responses.service.engine.mlx_lm_compat import (
    KVCache,
    RotatingKVCache,
    make_prompt_cache,
)
from mlx_responses.service.engine.model import plain_caches
from mlx_responses.service.engine.sliding_window import (
    apply_window,
    declared_window,
    partly_sliding,
)

from tests.support.random_model import tiny_qwen3

BASE: dict[str, Any] = {"model_type": "qwen3", "num_hidden_layers": 3}
ALL = {"use_sliding_window": True, "sliding_window": 2048, "max_window_layers": 0}


@pytest.mark.parametrize(
    ("extra", "window", "partly"),
    [
        (ALL, 2048, False),
        ({**ALL, "max_window_layers": 1}, None, True),  # layer 0 attends to everything
        ({**ALL, "use_sliding_window": False}, None, False),  # Qwen2.5's usual config
        ({**ALL, "sliding_window": None}, None, False),
        ({"sliding_window": 4096}, None, False),  # no use_sliding_window: not declared
        ({"sliding_window": 8, "layer_types": ["sliding_attention"] * 3}, 8, False),
        ({"sliding_window": 8, "layer_types": [*["sliding_attention"] * 2, "full"]}, None, True),
        ({}, None, False),
    ],
)
def test_declared_window(extra: dict[str, Any], window: int | None, partly: bool) -> None:
    config = BASE | extra
    assert declared_window(config) == window
    assert partly_sliding(config) is partly


def test_apply_window_gives_every_layer_a_rotating_cache() -> None:
    model = tiny_qwen3()
    assert plain_caches(model)
    assert apply_window(model, BASE | ALL, "tiny") == 2048
    caches = make_prompt_cache(model)
    assert len(caches) == 3 and all(type(c) is RotatingKVCache for c in caches)
    assert all(c.max_size == 2048 and c.keep == 0 for c in caches)
    assert not plain_caches(model)


def test_a_partial_window_is_left_alone_and_said(caplog: pytest.LogCaptureFixture) -> None:
    model = tiny_qwen3()
    with caplog.at_level(logging.WARNING):
        assert apply_window(model, BASE | ALL | {"max_window_layers": 2}, "tiny") is None
    assert all(type(c) is KVCache for c in make_prompt_cache(model))
    assert "sliding-window attention for some layers only" in caplog.text
