"""The fixed-slot engine (`engine="slots"`) decodes what mlx-lm's BatchGenerator decodes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import collect, generate, greedy

PROMPTS = (
    "Reply with: hello",
    "the cat sat on the mat and the cat sat on the",
    "Here is a list: apples, pears, plums. Repeat the list twice:",
)


def _ban(token: int) -> Any:
    def processor(tokens: mx.array, logits: mx.array) -> mx.array:
        return logits.at[:, token].add(-1e9)

    return processor


@pytest.mark.parametrize("which", ["bundled", "random"])
async def test_greedy_output_matches_the_batch_generator(
    which: str, short_context_model: Path, random_model: Path
) -> None:
    path = short_context_model if which == "bundled" else random_model
    requests = greedy(PROMPTS, 40)
    requests.append((PROMPTS[1], SamplingParams(max_tokens=40, temperature=0.0), [_ban(13)]))
    off = {"prompt_cache_max_entries": 0}
    batch, _ = await generate(path, requests, **off)
    slots, stats = await generate(path, requests, engine="slots", **off)
    assert slots == batch
    assert stats.max_batch_seen >= 2
    (alone,), _ = await generate(path, requests[:1], engine="slots", **off)
    assert alone == batch[0]


async def test_staggered_arrivals_and_a_reused_prompt_cache(random_model: Path) -> None:
    """Sequences join and leave a running batch, and a second turn starts from the cache."""
    want, _ = await generate(random_model, greedy(PROMPTS, 24), prompt_cache_max_entries=0)
    engine = EngineWorker(lambda: load_model(random_model), engine="slots", max_batch_size=2)
    loaded = await engine.start()
    try:
        outputs: list[tuple[int, ...]] = []
        for _ in range(2):  # the second round hits the prompt cache
            streams = []
            for text in PROMPTS:
                ids = loaded.tokenizer.encode(text)
                streams.append(engine.submit(ids, SamplingParams(max_tokens=24, temperature=0.0)))
                await asyncio.sleep(0.01)  # each joins a batch already decoding
            outputs = list(await asyncio.gather(*(collect(s) for s in streams)))
            assert outputs == want
    finally:
        engine.stop()
    assert engine.stats.prompt_cache_hits >= len(PROMPTS)


async def test_a_cancelled_sequence_frees_its_slot_for_the_next(random_model: Path) -> None:
    want, _ = await generate(random_model, greedy(PROMPTS, 32), prompt_cache_max_entries=0)
    engine = EngineWorker(
        lambda: load_model(random_model),
        engine="slots",
        max_batch_size=2,
        prompt_cache_max_entries=0,
    )
    loaded = await engine.start()
    try:
        sampling = SamplingParams(max_tokens=32, temperature=0.0)
        doomed = engine.submit(loaded.tokenizer.encode("cancel me soon"), sampling)
        first = engine.submit(loaded.tokenizer.encode(PROMPTS[0]), sampling)
        waiting = [engine.submit(loaded.tokenizer.encode(t), sampling) for t in PROMPTS[1:]]
        async for _ in doomed.batches():
            doomed.cancel()  # after its first token: its slot goes to a waiting prompt
        outputs = await asyncio.gather(*(collect(s) for s in [first, *waiting]))
        # Sampled and with logprobs, a sequence also runs in a slot.
        sampled = engine.submit(
            loaded.tokenizer.encode(PROMPTS[0]),
            SamplingParams(max_tokens=8, temperature=1.0, logprobs=2),
        )
        chunks = [c async for batch in sampled.batches() for c in batch]
    finally:
        engine.stop()
    assert list(outputs) == want
    assert engine.stats.cancelled == 1
    logprobs = [lp for c in chunks for lp in c.logprobs]
    assert sum(c.tokens for c in chunks) == 8 and len(logprobs) == 8
    assert all(len(lp.top) == 2 and lp.logprob <= 0 for lp in logprobs)
