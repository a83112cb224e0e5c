"""Admission by bytes (--memory-limit): a request waits for memory and is served when it frees;
the prompt cache gives memory back first; one that can never fit is refused before it queues."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mlx_responses.service.engine.memory.budget import MemoryBudget, MemoryLimitError
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import collect

TOKENS = 24
TEXT = "Count the boats coming home with the morning tide"


def _budget() -> MemoryBudget:
    # No runtime: the sums below are the model's weights and its KV only.
    return MemoryBudget(1 << 40, measure_runtime=lambda: 0)


def _fit(engine: EngineWorker, budget: MemoryBudget, tokens: int, sequences: int) -> None:
    """Sets the budget to the weights and `sequences` reservations of `tokens` tokens (and a
    little: less than one more)."""
    account = engine.kv.account
    assert account is not None
    held = account.bytes_of([tokens] * sequences)
    more = account.bytes_of([tokens] * (sequences + 1)) - held
    budget.limit = account.weights + held + more // 2


@pytest.mark.parametrize("engine_kind", ["batch", "slots"])
async def test_a_request_waits_for_memory_and_runs_when_it_frees(
    random_model: Path, engine_kind: str
) -> None:
    budget = _budget()
    engine = EngineWorker(
        lambda: load_model(random_model),
        engine=engine_kind,
        memory=budget,
        prompt_cache_max_entries=0,
        stream_window=0.0,
    )
    loaded = await engine.start()
    prompt = loaded.tokenizer.encode(TEXT)
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    try:
        alone = await collect(engine.submit(prompt, sampling))
        _fit(engine, budget, len(prompt) + TOKENS, sequences=1)
        first, second = engine.submit(prompt, sampling), engine.submit(prompt, sampling)
        ended: list[str] = []

        async def run(stream: object, name: str) -> tuple[int, ...]:
            ids = await collect(stream)
            ended.append(name)
            return ids

        outputs = await asyncio.gather(run(first, "first"), run(second, "second"))
    finally:
        engine.stop()
    # Both served in full, the same tokens as alone: nothing was cut or corrupted.
    assert list(outputs) == [alone, alone]
    assert ended == ["first", "second"]
    # One batch never held both: the second waited for the first's memory.
    assert engine.stats.max_batch_seen == 1
    assert engine.stats.admission_waits == 1 and engine.stats.admission_wait_seconds > 0


async def test_the_prompt_cache_gives_memory_back_before_a_request_waits(
    random_model: Path,
) -> None:
    budget = _budget()
    engine = EngineWorker(lambda: load_model(random_model), memory=budget, stream_window=0.0)
    loaded = await engine.start()
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    try:
        first = loaded.tokenizer.encode(TEXT)
        await collect(engine.submit(first, sampling))
        kept = engine.stats.prompt_cache_bytes
        assert kept > 0  # the finished turn's entry
        other = loaded.tokenizer.encode("An unrelated prompt about mountains and rivers")
        account = engine.kv.account
        assert account is not None
        # Room for the new sequence and half the cached entry: the entry must go.
        budget.limit = account.weights + account.bytes_of([len(other) + TOKENS]) + kept // 2
        await collect(engine.submit(other, sampling))
    finally:
        engine.stop()
    assert engine.stats.admission_waits == 0  # the cache made room at once
    assert engine.stats.prompt_cache_evictions >= 1


async def test_a_request_that_can_never_fit_is_refused_before_it_queues(
    random_model: Path,
) -> None:
    budget = _budget()
    engine = EngineWorker(lambda: load_model(random_model), memory=budget)
    loaded = await engine.start()
    try:
        prompt = loaded.tokenizer.encode(TEXT)
        _fit(engine, budget, 1024, sequences=1)
        with pytest.raises(MemoryLimitError) as refused:
            engine.submit(prompt, SamplingParams(max_tokens=4096, temperature=0.0))
        assert refused.value.param == "max_output_tokens"
        assert engine.in_flight == 0  # not queued
        # One that fits is still served.
        ids = await collect(engine.submit(prompt, SamplingParams(max_tokens=8, temperature=0.0)))
        assert len(ids) == 8
    finally:
        engine.stop()
