"""A drafting head's drafts replaced by the greedy output itself (an oracle), wrong after the
first on some rows: verifies then keep every draft, or a part, and the output must stay the
greedy one (tests/engine/test_mtp.py, test_deepseek_mtp.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine import heads
from mlx_responses.service.engine.batch.speculative import SpeculativeGenerationBatch
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import EngineStats

from tests.support.engine import Request, generate


async def with_oracle(
    folder: Path, requests: list[Request], monkeypatch: pytest.MonkeyPatch
) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]], EngineStats]:
    """`requests` on the model in `folder` (mlx-lm's batch) without its head, then with the
    head's drafts planted from that output (`plant_oracle`): both outputs and the second
    run's stats."""
    plain, _ = await generate(folder, requests, engine="batch", mtp=False)
    tokenizer = load_model(folder).tokenizer
    pairs = zip(requests, plain, strict=True)
    expected = [tokenizer.encode(text) + list(out) for (text, _, _), out in pairs]
    plant_oracle(monkeypatch, expected)
    fast, stats = await generate(
        folder, requests, engine="batch", speculative="ngram", num_draft_tokens=3
    )
    return plain, fast, stats


def plant_oracle(monkeypatch: pytest.MonkeyPatch, expected: list[list[int]]) -> None:
    """Each head draft is the next token of the row's `expected` ids (prompt and greedy
    output), plus one after the first draft on rows of odd length (a partial keep)."""
    batch: list[SpeculativeGenerationBatch] = []
    draft, drafts = SpeculativeGenerationBatch._head_draft, heads.next_drafts

    def seen(self: SpeculativeGenerationBatch, *args: Any) -> Any:
        batch[:] = [self]
        return draft(self, *args)

    def oracle(logits: mx.array, rules: Any, position: int, log_q: Any) -> mx.array:
        drafts(logits, rules, position, log_q)
        (current,) = batch
        pending: list[int] = current._next_tokens.tolist()  # type: ignore[assignment]
        out = []
        for row, token in zip(current.tokens, pending, strict=True):
            context = [*row, token]
            full = next(e for e in expected if e[: len(context)] == context)
            at = len(context) + position
            good = full[at] if at < len(full) else 0
            out.append(good + (1 if position and len(context) % 2 else 0))
        return mx.array(out, dtype=mx.uint32)

    monkeypatch.setattr(SpeculativeGenerationBatch, "_head_draft", seen)
    monkeypatch.setattr(heads, "next_drafts", oracle)
