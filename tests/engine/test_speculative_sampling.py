"""Sampled requests speculate too (`acceptance.py`): with n-gram drafts a seeded request's
tokens are the ones it samples without drafting, batch or alone, with penalties and filters;
with a draft model its drafts are drawn from the draft and kept by the rejection rule."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine import speculation
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.penalties import penalty_processors
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.metrics import EngineMetrics
from prometheus_client import CollectorRegistry

from tests.engine.test_draft_model import always_draft, head32_target  # noqa: F401
from tests.engine.test_speculative import PROMPTS, _ban
from tests.support.engine import Request, collect, generate

TOKENS = 40


@pytest.fixture
def sampled_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sampled rows draft in a batch too (the policy keeps them to drafting alone,
    `speculation.SAMPLED_BATCH`): the mechanics under test, not the policy."""
    monkeypatch.setattr(speculation, "SAMPLED_BATCH", 1 << 20)


def _sampled() -> list[Request]:
    copy, hello, cat = PROMPTS
    return [
        (copy, SamplingParams(max_tokens=TOKENS, temperature=0.7, seed=1), []),
        (copy, SamplingParams(max_tokens=TOKENS, temperature=1.0, top_p=0.9, top_k=40, seed=2), []),
        (
            cat,
            SamplingParams(max_tokens=TOKENS, temperature=0.7, seed=3),
            penalty_processors(0.5, 0.3),
        ),
        (copy, SamplingParams(max_tokens=TOKENS, temperature=0.0), penalty_processors(0.0, 0.4)),
        # A processor with state of its own (as a grammar): decodes normally in the verify steps.
        (hello, SamplingParams(max_tokens=TOKENS, temperature=0.7, seed=4), [_ban(13)]),
    ]


@pytest.mark.parametrize("engine", ["batch", "slots"])
@pytest.mark.usefixtures("sampled_in_batches")
async def test_seeded_sampled_output_is_identical_with_ngram_drafts(
    engine: str, short_context_model: Path
) -> None:
    requests = _sampled()
    off = {"prompt_cache_max_entries": 0, "engine": engine}
    on = {**off, "speculative": "ngram", "num_draft_tokens": 4}
    plain, _ = await generate(short_context_model, requests, **off)
    fast, stats = await generate(short_context_model, requests, **on)
    assert fast == plain
    assert stats.verify_steps > 0 and stats.accepted_tokens > 0
    # Alone, the copying sampled prompt is the same too (drafts a different width).
    (single,), alone = await generate(short_context_model, requests[:1], **on)
    assert single == plain[0] and alone.accepted_tokens > 0


async def _twice(path: Path, engine: str, sampling: SamplingParams) -> list[tuple[int, ...]]:
    """A seeded request run twice alone, after three sampled ones together (each row's q
    must meet its own p in the batch)."""
    worker = EngineWorker(
        lambda: load_model(path),
        speculative="draft",
        load_draft=lambda: load_model(path),
        engine=engine,
        prompt_cache_max_entries=0,
    )
    loaded = await worker.start()
    try:
        together = [
            worker.submit(loaded.tokenizer.encode(text), replace(sampling, seed=None))
            for text in PROMPTS
        ]
        await asyncio.gather(*(collect(stream) for stream in together))
        assert worker.stats.max_batch_seen > 1
        prompt: Any = loaded.tokenizer.encode(PROMPTS[1])
        runs = [await collect(worker.submit(prompt, sampling)) for _ in range(2)]
    finally:
        worker.stop()
    assert worker.stats.verify_steps > 0
    # Its own copy as the draft: q is p (up to rounding), so nearly every draft is kept; a
    # misaligned q or p would refuse most.
    assert worker.stats.accepted_tokens >= 0.8 * worker.stats.draft_tokens > 0
    return runs


@pytest.mark.parametrize("engine", ["batch", "slots"])
@pytest.mark.usefixtures("sampled_in_batches")
async def test_sampled_requests_draft_with_a_draft_model_reproducibly(
    head32_target: Path,  # noqa: F811
    always_draft: None,  # noqa: F811
    engine: str,
) -> None:
    sampling = SamplingParams(max_tokens=24, temperature=0.8, top_k=50, seed=9)
    first, again = await _twice(head32_target, engine, sampling)
    assert len(first) == 24 and first == again  # a seeded request is reproducible


@pytest.mark.parametrize("engine", ["batch", "slots"])
@pytest.mark.usefixtures("sampled_in_batches")
async def test_drafts_proposed_and_kept_reach_the_chunks_and_metrics(
    engine: str, short_context_model: Path
) -> None:
    registry = CollectorRegistry()
    worker = EngineWorker(
        lambda: load_model(short_context_model),
        speculative="ngram",
        engine=engine,
        metrics=EngineMetrics(registry),
    )
    loaded = await worker.start()
    try:
        drafted, accepted = [0, 0], [0, 0]
        streams = [
            worker.submit(loaded.tokenizer.encode(text), sampling, processors)
            for text, sampling, processors in _sampled()[:2]
        ]
        for k, stream in enumerate(streams):
            async for chunks in stream.batches():
                for chunk in chunks:
                    drafted[k] += chunk.draft_tokens
                    accepted[k] += chunk.accepted_draft_tokens
    finally:
        worker.stop()
    stats = worker.stats
    assert sum(drafted) == stats.draft_tokens and sum(accepted) == stats.accepted_tokens > 0
    assert all(d >= a for d, a in zip(drafted, accepted, strict=True))
    labels = {"model_name": loaded.alias}
    sample = registry.get_sample_value
    assert sample("mlx_responses_spec_decode_draft_tokens_total", labels) == stats.draft_tokens
    assert sample("mlx_responses_spec_decode_accepted_tokens_total", labels) == (
        stats.accepted_tokens
    )
