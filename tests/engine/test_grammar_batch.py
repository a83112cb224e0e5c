"""Batched grammar masks: a batch mixing constrained and free sequences decodes as each alone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlx_lm.generate import GenerationBatch
from mlx_responses.service.engine.batch import grammar_batch
from mlx_responses.service.engine.batch.grammar_batch import GrammarGenerationBatch
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.penalties import penalty_processors
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.structured import GrammarProcessor
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.text.grammars import Grammar, GrammarFactory
from mlx_responses.service.text.json_bounds import JsonBounds

from tests.support.engine import collect

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 10}, "n": {"type": "integer"}},
    "required": ["city", "n"],
    "additionalProperties": False,
}
PROMPTS = ("Give me a city as JSON", "Write a poem", "Another city, JSON", "Count to ten")
TOKENS = 40


def _processor(grammar: Grammar) -> GrammarProcessor:
    return GrammarProcessor(grammar.matcher, grammar.vocab_size)


def _processors(grammars: GrammarFactory, which: int) -> list[Any]:
    """Fresh (stateful) processors: grammar, none, penalty + grammar, penalty alone."""
    bounds = JsonBounds.for_budget(TOKENS)
    if which == 0:
        return [_processor(grammars.json_schema(SCHEMA, bounds))]
    if which == 2:
        return [*penalty_processors(0.5, 0.3), _processor(grammars.json_schema(SCHEMA, bounds))]
    if which == 3:
        return penalty_processors(0.4, 0.0)
    return []


async def _decode(engine: EngineWorker, grammars: GrammarFactory, which: list[int]) -> list[Any]:
    tokenizer = engine.loaded.tokenizer
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    streams = [
        engine.submit(tokenizer.encode(PROMPTS[i]), sampling, _processors(grammars, i))
        for i in which
    ]
    return list(await asyncio.gather(*(collect(s) for s in streams)))


async def test_mixed_batch_decodes_as_each_sequence_alone(
    random_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    widest: list[int] = [0]
    fill = grammar_batch.batch_mask

    def spy(grammars: list[Any], tokens: list[int]) -> np.ndarray:
        widest[0] = max(widest[0], sum(g is not None for g in grammars))
        return fill(grammars, tokens)

    monkeypatch.setattr(grammar_batch, "batch_mask", spy)
    engine = EngineWorker(lambda: load_model(random_model), prompt_cache_max_entries=0)
    loaded = await engine.start()
    try:
        grammars = GrammarFactory(loaded.tokenizer._tokenizer, loaded.vocab_size)
        everyone = list(range(len(PROMPTS)))
        together = await _decode(engine, grammars, everyone)
        assert widest[0] == 2  # both grammars were masked in one batched step
        alone = [(await _decode(engine, grammars, [i]))[0] for i in everyone]
        # The library's own per-sequence processor calls give the same tokens too.
        monkeypatch.setattr(GrammarGenerationBatch, "_step", GenerationBatch._step)
        library = await _decode(engine, grammars, everyone)
    finally:
        engine.stop()
    assert together == alone == library
    for i in (0, 2):
        ids = [t for t in together[i] if t not in loaded.tokenizer.eos_token_ids]
        text = loaded.tokenizer.decode(ids)
        assert set(json.loads(text)) == {"city", "n"}
    assert len(together[1]) == TOKENS  # the free sequence ran its whole budget
