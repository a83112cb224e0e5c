"""A lone sequence drafts on the solo path (`solo/drafting.py`): the same tokens as without
drafts, its prompt-cache entry exact, and a hand-over mid-stream unchanged."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.engine.test_speculative import PROMPTS
from tests.support.engine import collect, generate, greedy

TOKENS = 48


async def test_a_lone_sequence_drafts_on_the_solo_path_and_its_cache_entry_is_exact(
    short_context_model: Path,
) -> None:
    requests = greedy(PROMPTS[:1], TOKENS)
    requests.append((PROMPTS[0], SamplingParams(max_tokens=TOKENS, temperature=0.7, seed=3), []))
    off = {"engine": "slots", "prompt_cache_max_entries": 8}
    for request in requests:
        (plain,), _ = await generate(short_context_model, [request], **off)
        # Twice: the second turn starts from the first's entry, which holds what was fed.
        (fast,), stats = await generate(
            short_context_model, [request], turns=2, speculative="ngram", **off
        )
        assert fast == plain
        assert stats.solo_sequences == 2 and stats.handovers == 0
        assert stats.verify_steps > 0 and stats.accepted_tokens > 0
        assert stats.prompt_cache_hits == 1


async def test_a_drafting_lone_sequence_hands_over_unchanged(short_context_model: Path) -> None:
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    alone = [(await generate(short_context_model, greedy([t], TOKENS)))[0][0] for t in PROMPTS[:2]]
    engine = EngineWorker(
        lambda: load_model(short_context_model), speculative="ngram", engine="slots"
    )
    loaded = await engine.start()
    try:
        first = engine.submit(loaded.tokenizer.encode(PROMPTS[0]), sampling)
        ids: list[int] = []
        batches = first.batches()
        async for chunks in batches:
            ids.extend(i for chunk in chunks for i in chunk.token_ids)
            if len(ids) >= 12:
                break
        drafted_alone = engine.stats.accepted_tokens
        second = engine.submit(loaded.tokenizer.encode(PROMPTS[1]), sampling)

        async def rest() -> None:
            async for chunks in batches:
                ids.extend(i for chunk in chunks for i in chunk.token_ids)

        _, other = await asyncio.gather(rest(), collect(second))
    finally:
        engine.stop()
    assert drafted_alone > 0 and engine.stats.handovers == 1
    assert tuple(ids) == alone[0] and other == alone[1]
