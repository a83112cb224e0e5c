"""--kv-bits: live and prompt-cached sequences hold quantized KV, and generation stays sane."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.engine import generate, greedy
from tests.support.random_model import build_random_model

TEXTS = ("hello world " * 20, "short", "the cat sat on the mat " * 5)


@pytest.fixture(scope="module")
def head32_model(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A random model whose head dimension (32) can be quantized in groups of 32."""
    return build_random_model(
        tmp_path_factory.mktemp("kv") / "kv-chat",
        hidden_size=128,
        intermediate_size=256,
        seed=5,
        tokenizer_from=model_path,
    )


async def test_kv_bits_generation_and_prompt_cache_bytes(head32_model: Path) -> None:
    requests = greedy(TEXTS, 32)
    # Two turns: the second is served from prompt-cache entries the first left behind.
    full, fp = await generate(head32_model, requests, turns=2)
    q8_out, q8 = await generate(head32_model, requests, turns=2, kv_bits=8)
    q4_out, q4 = await generate(head32_model, requests, turns=2, kv_bits=4)
    assert q8.cached_tokens > 0 and q8.prompt_cache_hits > 0
    # 8-bit KV barely moves a greedy decode; a broken cache (mask, padding) would derail it.
    for a, b in zip(full, q8_out, strict=True):
        assert sum(x == y for x, y in zip(a, b, strict=True)) >= 0.75 * len(a)
    assert all(len(out) == 32 for out in q4_out)
    # The prompt cache is accounted by what it holds: fp32 ≈ 4 B/value, 8-bit ≈ 1.25, 4-bit ≈ 0.75.
    assert q8.prompt_cache_bytes < 0.4 * fp.prompt_cache_bytes
    assert q4.prompt_cache_bytes < 0.7 * q8.prompt_cache_bytes
    # Alone or in a ragged batch, and with speculation, the quantized decode is the same.
    (single,), _ = await generate(head32_model, requests[:1], kv_bits=8)
    assert single == q8_out[0]
    spec, stats = await generate(head32_model, requests, kv_bits=8, speculative="ngram")
    assert spec == q8_out and stats.accepted_tokens > 0
