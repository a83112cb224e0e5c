"""seed_oss 4-bit with tied embeddings: mlx-lm 0.32 computes its logits as
`h @ embed_tokens.weight.T`, a packed weight once quantized, so it failed on every request
(refused at load by the probe); `engine/model_fixes.py` takes them from `as_linear`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_responses.service.engine.model import UnservableModelError, load_model

from tests.support.engine import generate, greedy

PROMPTS = ["Hello there, how are you doing today?", "Count to ten", "Why?", "abc"]
TOKENS = 6


async def test_tied_4bit_seed_oss_serves_its_dequantized_head(
    zoo_quantized: Callable[[str], Path],
) -> None:
    path = zoo_quantized("seed_oss")
    model, tokenizer = load(str(path))[:2]
    assert model.tie_word_embeddings  # the zoo's seed_oss keeps mlx-lm's default
    embed = model.model.embed_tokens
    weight = mx.dequantize(embed.weight, embed.scales, embed.biases, embed.group_size, embed.bits)
    expected = []
    for p in PROMPTS:  # greedy by hand: the head mlx-lm meant, on the dequantized weight
        ids = tokenizer.encode(p)
        out: list[int] = []
        for _ in range(TOKENS):
            h = model.model(mx.array([ids + out]))
            out.append(int(mx.argmax(h[0, -1] @ weight.T).item()))
            if out[-1] in tokenizer.eos_token_ids:
                break
        expected.append(tuple(out))
    together, _ = await generate(path, greedy(PROMPTS, TOKENS), engine="auto")
    assert [tuple(ids) for ids in together] == expected


def test_unpatched_tied_4bit_seed_oss_is_refused_at_load(
    zoo_quantized: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the fix the probe refuses it (mlx-lm's own `generate` fails the same way)."""
    monkeypatch.setattr("mlx_responses.service.engine.model.fix_model", lambda model: None)
    with pytest.raises(UnservableModelError, match=r"seed_oss.*matmul"):
        load_model(zoo_quantized("seed_oss"))
