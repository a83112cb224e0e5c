"""Speculative (n-gram) decoding leaves greedy output token-identical, in and out of a batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.speculation import NgramDrafter
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import collect, generate, greedy

FILE = "".join(f"def handler_{i}(request):\n    return respond(request, {i})\n" for i in range(12))
PROMPTS = (
    f"Here is a file:\n{FILE}\nCopy it exactly:\n{FILE[:200]}",  # copies a long span
    "Reply with: hello",
    "the cat sat on the mat and the cat sat on the",
)


def _ban(token: int) -> Any:
    def processor(tokens: mx.array, logits: mx.array) -> mx.array:
        return logits.at[:, token].add(-1e9)

    return processor


@pytest.mark.parametrize("engine", ["batch", "slots"])
@pytest.mark.parametrize("which", ["bundled", "random"])
async def test_greedy_output_is_identical_with_ngram_speculation(
    which: str, engine: str, short_context_model: Path, random_model: Path
) -> None:
    path = short_context_model if which == "bundled" else random_model
    requests = greedy(PROMPTS, 48)
    # A constrained sequence in the same batch decodes normally inside verify steps.
    requests.append((PROMPTS[0], SamplingParams(max_tokens=48, temperature=0.0), [_ban(13)]))
    off = {"prompt_cache_max_entries": 0, "engine": engine}
    on = {**off, "speculative": "ngram", "num_draft_tokens": 5}
    plain, _ = await generate(path, requests, **off)
    fast, stats = await generate(path, requests, **on)
    assert fast == plain
    assert stats.verify_steps > 0 and stats.accepted_tokens > 0
    # Alone, the copying prompt gives the same tokens as in the batch.
    (single,), _ = await generate(path, requests[:1], **on)
    assert single == plain[0]


@pytest.mark.parametrize("engine_kind", ["batch", "slots"])
async def test_accepted_drafts_reach_the_stream_as_one_chunk_per_step(
    random_model: Path, engine_kind: str
) -> None:
    engine = EngineWorker(lambda: load_model(random_model), speculative="ngram", engine=engine_kind)
    loaded = await engine.start()
    try:
        sizes: list[int] = []
        stream = engine.submit(loaded.tokenizer.encode(PROMPTS[0]), greedy(PROMPTS, 64)[0][1])
        ids = await collect(stream, sizes)
    finally:
        engine.stop()
    assert len(ids) == 64 and max(sizes) > 1
    # One chunk per decode step (the worker hands over each step's tokens together).
    assert len(sizes) <= engine.stats.decode_steps


def test_drafter_continues_the_latest_earlier_occurrence() -> None:
    drafter = NgramDrafter()
    drafter.sync([1, 2, 3, 4, 9, 1, 2, 3, 5, 6, 7], 1)
    assert drafter.draft(3) == []  # "7 1" never occurred before
    drafter.sync([1, 2, 3, 4, 9, 1, 2, 3, 5, 6, 7, 1], 2)
    assert drafter.draft(3) == [3, 5, 6]  # the latest "1 2" continued with 3 5 6
    assert drafter.draft(0) == []


def test_drafter_continues_a_loop() -> None:
    drafter = NgramDrafter()
    drafter.sync([9, 4, 7, 4, 7], 4)
    assert drafter.draft(5) == [7, 4, 7, 4, 7]  # the period-2 loop, continued
    assert drafter.ready()
    fresh = NgramDrafter()
    fresh.sync([1, 2, 3])
    assert not fresh.ready()  # nothing repeats: no need to wait for the pending token
