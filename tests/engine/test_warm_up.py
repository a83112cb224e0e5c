"""The engine's warm-up: a short generation on the MLX thread that leaves no trace.

It runs through the scheduler requests use (the solo path unconstrained; the slots or the batch
with a logits processor), and leaves the engine as it found it: its counters, an empty prompt
cache (the next request reads nothing from it) and no stream. Beside requests it is skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.penalties import penalty_processors
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

PROMPT = "The keeper of the lighthouse writes the tides in his logbook. " * 4


@pytest.mark.parametrize("engine", ["slots", "batch"])
async def test_the_warm_up_leaves_no_trace(random_model: Path, engine: str) -> None:
    worker = EngineWorker(lambda: load_model(random_model), engine=engine)
    loaded = await worker.start()
    try:
        prompt = loaded.tokenizer.encode(PROMPT)
        before = dataclasses.replace(worker.stats)
        assert await worker.warm_up(prompt) > 0  # solo
        assert await worker.warm_up(prompt, penalty_processors(0.5, 0.0)) > 0  # scheduler
        assert worker.stats == before
        assert worker.kv.prompt is not None and len(worker.kv.prompt.memory) == 0
        cached = []
        async for chunks in worker.submit(prompt, SamplingParams(max_tokens=3)).batches():
            cached += [c.cached_tokens for c in chunks if c.token_ids]
        assert cached[0] == 0  # nothing of the warm-up's was kept
        assert worker.stats.completed == 1 and worker.stats.solo_sequences == 1
    finally:
        worker.stop()


async def test_a_warm_up_beside_requests_is_skipped(random_model: Path) -> None:
    worker = EngineWorker(lambda: load_model(random_model))
    loaded = await worker.start()
    try:
        prompt = loaded.tokenizer.encode(PROMPT)
        stream = worker.submit(prompt, SamplingParams(max_tokens=100_000, temperature=0.0))
        batches = stream.batches()
        await asyncio.wait_for(anext(batches), 60)  # decoding
        assert await asyncio.wait_for(worker.warm_up(prompt), 60) == 0.0
        stream.cancel()
        async for _ in batches:
            pass
    finally:
        worker.stop()
