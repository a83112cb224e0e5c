"""A long new prompt is prefilled in bounded chunks between decode steps of running streams."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from mlx_responses.service.engine import worker as worker_module
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import collect

BUDGET = 128


@pytest.mark.parametrize("kind", ["batch", "slots"])
async def test_long_prompt_does_not_stall_running_streams(random_model: Path, kind: str) -> None:
    engine = EngineWorker(
        lambda: load_model(random_model),
        engine=kind,
        max_prefill_tokens_per_step=BUDGET,
        prompt_cache_max_entries=0,
    )
    loaded = await engine.start()
    try:
        greedy = SamplingParams(max_tokens=160, temperature=0.0)
        runners = [engine.submit(loaded.tokenizer.encode(f"count {i}"), greedy) for i in range(2)]
        running = [asyncio.ensure_future(collect(s)) for s in runners]
        while engine.stats.generated_tokens < 4:
            await asyncio.sleep(0.01)
        steps_before = engine.stats.decode_steps
        long_prompt = [(7 * i) % 2000 + 3 for i in range(1500)]
        newcomer = await collect(
            engine.submit(long_prompt, SamplingParams(max_tokens=2, temperature=0.0))
        )
        outputs = await asyncio.gather(*running)
    finally:
        engine.stop()
    stats = engine.stats
    assert len(newcomer) == 2 and all(len(o) == 160 for o in outputs)
    # The whole prompt went in while the others decoded, never more than BUDGET per step...
    assert stats.prefill_tokens_while_decoding >= len(long_prompt) - 1
    assert 0 < stats.max_prefill_tokens_per_decode_step <= BUDGET
    # ... so the running streams got a token in each of the ≥ 1500/128 steps it took.
    assert stats.decode_steps - steps_before >= (len(long_prompt) - 1) // BUDGET


@pytest.mark.parametrize("kind", ["batch", "slots"])
async def test_prompts_arriving_together_prefill_as_one_batch(
    random_model: Path, kind: str
) -> None:
    """--prefill-batch-size 16: twelve prompts at once give each its greedy output alone."""
    greedy = SamplingParams(max_tokens=12, temperature=0.0)
    prompts = [[(5 * i + j) % 900 + 3 for j in range(20 + i)] for i in range(12)]
    alone = EngineWorker(lambda: load_model(random_model), prompt_cache_max_entries=0)
    await alone.start()
    try:
        expected = [await collect(alone.submit(p, greedy)) for p in prompts]
    finally:
        alone.stop()
    together = EngineWorker(
        lambda: load_model(random_model),
        engine=kind,
        max_batch_size=16,
        prefill_batch_size=16,
        prompt_cache_max_entries=0,
    )
    await together.start()
    try:
        streams = [together.submit(p, greedy) for p in prompts]
        outputs = await asyncio.gather(*(collect(s) for s in streams))
    finally:
        together.stop()
    assert outputs == expected


@pytest.mark.parametrize(
    ("device", "given", "logged"),
    [
        ("cpu", {}, "on cpu: 8 prompts prefilled together, 512 prompt tokens"),
        ("gpu", {}, "on gpu: 16 prompts prefilled together, 8192 prompt tokens"),
        (
            "gpu",
            {"prefill_batch_size": 4, "max_prefill_tokens_per_step": 256},
            "on gpu: 4 prompts prefilled together, 256 prompt tokens",
        ),
    ],
)
async def test_prefill_defaults_follow_the_device_and_are_logged_once(
    random_model: Path,
    *,
    device: str,
    given: dict[str, int],
    logged: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The engine resolves the two prefill flags for its device at start, and says so once."""
    monkeypatch.setattr(worker_module, "device_kind", lambda: device)
    engine = EngineWorker(
        lambda: load_model(random_model), max_batch_size=16, prompt_cache_max_entries=0, **given
    )
    with caplog.at_level(logging.INFO, logger=worker_module.__name__):
        loaded = await engine.start()
    try:
        greedy = SamplingParams(max_tokens=3, temperature=0.0)
        streams = [engine.submit(loaded.tokenizer.encode(f"hi {i}"), greedy) for i in range(3)]
        outputs = await asyncio.gather(*(collect(s) for s in streams))
    finally:
        engine.stop()
    assert all(len(o) == 3 for o in outputs)
    lines = [r.getMessage() for r in caplog.records if "prefilled together" in r.getMessage()]
    assert len(lines) == 1 and logged in lines[0]
