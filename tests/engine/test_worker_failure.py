"""The engine thread outlives its own failures (service/engine/supervision.py).

A failure injected at each stage of the engine's loop: admitting (the prompt-cache look-up of
the requests admitted together), a decode step, extracting a finished sequence's cache, the
prompt cache's write and its disk tier's read. A failure of the loop fails the requests it held
with an error saying the engine was restarted, and the next requests complete; a cache failure
fails nothing (a read is a cold prefill: the same greedy tokens). An engine that keeps failing
gives up: what it held and what waited fail with the reason, its owner is told, its thread ends
and later submits are refused with the reason. Before, any failure outside a step ended the
engine for good (every later request a 503), a step's failure failed its batch with the bare
exception, and a cache failure failed the requests of the step or the admission it fell in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mlx_lm.generate import GenerationBatch
from mlx_responses.service.engine import worker as worker_module
from mlx_responses.service.engine.batch.scheduler import BatchScheduler
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.prompt_cache.cache import PromptCache
from mlx_responses.service.engine.prompt_cache.disk import PromptDisk
from mlx_responses.service.engine.requests import EngineStoppedError, SamplingParams
from mlx_responses.service.engine.supervision import Restarts
from mlx_responses.service.engine.worker import EngineWorker

RESTARTED = "The engine failed and was restarted (RuntimeError: injected"
# Long enough that the disk tier is looked up (more than one 256-token block).
TEXT = "The harbour town woke early and the boats went out. " * 40

# stage: (owner of the method, its name, whether the engine restarts: a cache's failure fails
# no request and rebuilds no scheduler)
STAGES: dict[str, tuple[Any, str, bool]] = {
    "admission": (worker_module, "look_up", True),
    "step": (BatchScheduler, "step", True),
    "extract": (GenerationBatch, "extract_cache", True),
    "cache write": (PromptCache, "keep", False),
    "disk read": (PromptDisk, "fetch", False),
}

Ending = tuple[str | None, str | None, tuple[int, ...]]


async def _ending(stream: Any) -> Ending:
    """How a generation ended: its finish reason, its error and its tokens."""
    ids: tuple[int, ...] = ()
    async for chunks in stream.batches():
        for chunk in chunks:
            ids += chunk.token_ids
            if chunk.finish_reason is not None:
                return chunk.finish_reason, chunk.error, ids
    return None, None, ids


def _failing(original: Callable[..., Any], times: float) -> Callable[..., Any]:
    """`original`, raising instead on its first `times` calls."""
    calls = 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls <= times:
            raise RuntimeError(f"injected failure {calls}")
        return original(*args, **kwargs)

    return wrapper


def _inject(monkeypatch: pytest.MonkeyPatch, stage: str, times: float = 1) -> None:
    owner, name, _ = STAGES[stage]
    monkeypatch.setattr(owner, name, _failing(getattr(owner, name), times))


@pytest.fixture
def engine(random_model: Path, tmp_path: Path) -> Iterator[EngineWorker]:
    """A worker on the random model: mlx-lm's batch (no solo path, so every sequence is
    extracted from it), a prompt cache with a disk tier."""
    worker = EngineWorker(
        lambda: load_model(random_model),
        solo=False,
        prompt_cache_dir=tmp_path,
        prompt_cache_disk_bytes=1 << 30,
    )
    yield worker
    worker.stop()


async def _run(engine: EngineWorker, prompts: list[list[int]], tokens: int = 8) -> list[Ending]:
    sampling = SamplingParams(max_tokens=tokens, temperature=0.0)
    streams = [engine.submit(prompt, sampling) for prompt in prompts]
    return list(await asyncio.wait_for(asyncio.gather(*map(_ending, streams)), 60))


@pytest.mark.parametrize("stage", list(STAGES))
async def test_an_injected_failure_fails_only_what_it_must_and_the_next_requests_complete(
    engine: EngineWorker, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    loaded = await engine.start()
    prompts = [loaded.tokenizer.encode(f"{i}. {TEXT}") for i in range(3)]
    trims: list[None] = []
    monkeypatch.setattr(worker_module, "give_back_memory", lambda: trims.append(None))
    _inject(monkeypatch, stage)
    ends = await _run(engine, prompts)
    for reason, error, _ in ends:
        assert reason == "length" or (reason == "error" and error and RESTARTED in error), ends
    restarts = STAGES[stage][2]
    if restarts:
        assert any(reason == "error" for reason, _, _ in ends), ends
        assert engine.stats.engine_restarts == 1
    else:  # a cache's failure fails no request
        assert [reason for reason, _, _ in ends] == ["length"] * 3
        assert engine.stats.engine_restarts == 0
        assert engine.stats.prompt_cache_failures == 1
    again = await _run(engine, prompts)  # served by the new scheduler: the restart is over
    assert [reason for reason, _, _ in again] == ["length"] * 3
    # A restart hands the dropped scheduler's and caches' heap back to the system.
    assert len(trims) == (1 if restarts else 0)
    if not restarts:  # a cold prefill (or an entry not kept): the same greedy tokens
        assert [ids for _, _, ids in again] == [ids for _, _, ids in ends]
    assert engine.alive and engine.failure is None


async def test_an_engine_that_keeps_failing_gives_up_and_says_why(
    engine: EngineWorker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    engine.restarts = Restarts(limit=3, window=60)
    told: list[str] = []
    engine.on_failure = told.append
    loaded = await engine.start()
    prompt = loaded.tokenizer.encode("hello there")
    _inject(monkeypatch, "step", times=float("inf"))
    with caplog.at_level(logging.ERROR):
        first = await _run(engine, [prompt])
        second = await _run(engine, [prompt])
        # The third failure stops it: the one running and those queued behind it fail so.
        last = await _run(engine, [prompt] * 3)
    assert [e[:2] for e in first + second] == [
        (
            "error",
            "The engine failed and was restarted (RuntimeError: injected failure 1); "
            "retry the request.",
        ),
        (
            "error",
            "The engine failed and was restarted (RuntimeError: injected failure 2); "
            "retry the request.",
        ),
    ]
    reason = "3 engine failures within 60s, the last RuntimeError: injected failure 3"
    assert engine.failure == reason
    assert {e[:2] for e in last} == {
        ("error", f"The engine failed repeatedly and was stopped ({reason}); retry the request.")
    }
    assert "injected failure 3" in caplog.text
    assert engine._thread is not None
    await asyncio.to_thread(engine._thread.join, 10)  # it ends: its model's unload joins it
    assert not engine._thread.is_alive()
    assert told == [reason]
    with pytest.raises(EngineStoppedError, match="failed repeatedly"):
        engine.submit(prompt, SamplingParams(max_tokens=8))
