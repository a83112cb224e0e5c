"""KV bytes per token from a config and --kv-bits, checked against the caches mlx-lm makes."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mlx_lm.models.cache import KVCache, QuantizedKVCache, RotatingKVCache
from mlx_responses.service.engine.memory.kv_layout import (
    KVLayout,
    activations,
    cache_windows,
    kv_layout,
    layer_windows,
)

from tests.support.random_model import tiny_qwen3

# A Llama-3-8B-like config: 32 layers, 32 query heads sharing 8 KV heads of 128, bfloat16.
LLAMA: dict[str, Any] = {
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
}


def test_plain_multi_head_attention() -> None:
    # No num_key_value_heads: every head keeps its KV; head_dim from hidden / heads.
    config = {"num_hidden_layers": 8, "hidden_size": 128, "num_attention_heads": 4}
    layout = kv_layout(config, dtype_bytes=4)
    assert layout.bytes_per_token == 8 * 2 * 128 * 4  # layers x (K, V) x hidden x float32
    assert layout.bytes_for(1) == 256 * layout.bytes_per_token  # a cache grows by 256 tokens
    assert layout.bytes_for(4096) == 4096 * layout.bytes_per_token


def test_grouped_query_attention() -> None:
    layout = kv_layout(LLAMA, dtype_bytes=2)
    assert layout.bytes_per_token == 32 * 2 * 8 * 128 * 2  # 128 KiB a token, not 512
    assert layout.bytes_per_token == 131072


def test_vision_language_config_nests_its_text_model() -> None:
    layout = kv_layout({"text_config": LLAMA, "vision_config": {}}, dtype_bytes=2)
    assert layout.bytes_per_token == 131072


@pytest.mark.parametrize(("bits", "per_element"), [(8, 1 + 4 / 64), (4, 0.5 + 4 / 64)])
def test_kv_bits(bits: int, per_element: float) -> None:
    # Packed bits plus a bfloat16 scale and bias per group of 64.
    layout = kv_layout(LLAMA, dtype_bytes=2, kv_bits=bits, group=64)
    assert layout.bytes_per_token == int(32 * 2 * 8 * 128 * per_element)
    assert layout.bytes_per_token < kv_layout(LLAMA, dtype_bytes=2).bytes_per_token


def test_sliding_window_caps_its_layers() -> None:
    # Gemma's spelling: every 6th layer attends to everything, the others over 512 tokens.
    config = {**LLAMA, "num_hidden_layers": 12, "sliding_window": 512, "sliding_window_pattern": 6}
    layout = kv_layout(config, dtype_bytes=2)
    assert layout.windows.count(None) == 2
    per_layer = 2 * 8 * 128 * 2
    assert layout.bytes_for(8192) == (2 * 8192 + 10 * 512) * per_layer
    # The full layers hold whole steps of 256 tokens; the windows hold what came.
    assert layout.bytes_for(100) == (2 * 256 + 10 * 100) * per_layer


@pytest.mark.parametrize(
    ("extra", "windows"),
    [
        ({"sliding_window": 64, "use_sliding_window": True, "max_window_layers": 0}, (64,) * 3),
        (
            {
                "sliding_window": 64,
                "layer_types": ["sliding_attention", "full_attention"] * 1 + ["sliding_attention"],
            },
            (64, None, 64),
        ),
        ({"sliding_window": 64}, ()),  # a bare window: mlx-lm's Qwen attends to everything
        ({"sliding_window": 64, "use_sliding_window": False}, ()),
    ],
)
def test_which_layers_slide(extra: dict[str, Any], windows: tuple[int | None, ...]) -> None:
    assert layer_windows({"num_hidden_layers": 3, **extra}) == windows


def _prefill(model: Any, cache: list[Any], tokens: int) -> None:
    model(mx.zeros((1, tokens), dtype=mx.int32), cache=cache)
    mx.eval([c.state for c in cache])


@pytest.mark.parametrize("tokens", [1, 300, 700])
def test_a_real_cache_holds_what_the_layout_says(tokens: int) -> None:
    config = {
        "num_hidden_layers": 3,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    }
    model = tiny_qwen3(**config)
    cache = [KVCache() for _ in range(3)]
    _prefill(model, cache, tokens)
    layout = kv_layout(config, dtype_bytes=4)
    assert sum(c.nbytes for c in cache) == layout.bytes_for(tokens)


def test_a_real_rotating_cache_stays_within_the_layout() -> None:
    config = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    }
    model = tiny_qwen3(**config)
    cache = [RotatingKVCache(max_size=128) for _ in range(2)]
    layout = kv_layout(config, dtype_bytes=4, windows=cache_windows(cache), chunk=64)
    assert layout.windows == (128, 128)
    for _ in range(5):  # 320 tokens in chunks of 64: the window rotates
        _prefill(model, cache, 64)
        assert sum(c.nbytes for c in cache) <= layout.bytes_for(320)
    assert layout.bytes_for(320) == layout.bytes_for(10_000)  # a window holds no more


def test_a_real_quantized_cache_holds_what_the_layout_says() -> None:
    config = {
        "num_hidden_layers": 2,
        "hidden_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 64,
    }
    model = tiny_qwen3(**config)
    cache = [QuantizedKVCache(group_size=64, bits=8) for _ in range(2)]
    _prefill(model, cache, 256)
    layout = kv_layout(config, dtype_bytes=4, kv_bits=8, group=64)
    assert sum(c.nbytes for c in cache) == layout.bytes_for(256)


def test_tokens_in() -> None:
    layout = KVLayout(layers=8, kv_heads=2, head_dim=64, dtype_bytes=4)
    assert layout.bytes_per_token == 8192
    assert layout.tokens_in(768 << 20) == (768 << 20) // 8192


def test_prefill_activations() -> None:
    config = {"num_hidden_layers": 8, "hidden_size": 128, "num_attention_heads": 4}
    cpu = activations(config, 4, rows=8, step=512, scores=True)
    gpu = activations(config, 4, rows=8, step=512, scores=False)
    # At most `rows` prompts prefill together, however many sequences live.
    assert cpu.bytes_for(16, 4096) == cpu.bytes_for(8, 4096) == 8 * cpu.bytes_for(1, 4096)
    assert cpu.bytes_for(0, 4096) == 0
    # On a CPU the scores grow with the keys attended to: 4 heads x 512 x 4096 float32 x 1.25,
    # 40 MiB a prompt (measured: 321 MiB for 8).
    assert cpu.bytes_for(1, 4096) - gpu.bytes_for(1, 4096) == 4 * 512 * 4096 * 5
    assert gpu.bytes_for(1, 4096) == gpu.bytes_for(1, 65536)
