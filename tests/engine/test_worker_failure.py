"""The engine's loop failing outside a decode step (admitting, cancelling): what it held and
what waited end with an error at once (before, they waited for a loop that was gone and the
failure went unlogged), and the engine refuses what comes next."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import EngineStoppedError, SamplingParams
from mlx_responses.service.engine.worker import EngineWorker


async def _ending(stream: Any) -> tuple[str | None, str | None]:
    async for chunks in stream.batches():
        for chunk in chunks:
            if chunk.finish_reason is not None:
                return chunk.finish_reason, chunk.error
    return None, None


async def test_a_failed_admission_fails_every_request_and_is_logged(
    random_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = EngineWorker(lambda: load_model(random_model), stream_window=0.0)
    loaded = await engine.start()

    def broken(*args: Any) -> Any:
        raise RuntimeError("the admission broke")

    engine._waiting.admit = broken  # type: ignore[method-assign]
    sampling = SamplingParams(max_tokens=8, temperature=0.0)
    prompt = loaded.tokenizer.encode("hello there")
    try:
        with caplog.at_level(logging.ERROR):
            streams = [engine.submit(prompt, sampling) for _ in range(3)]
            ends = await asyncio.wait_for(asyncio.gather(*map(_ending, streams)), 10)
        assert ends == [("error", "generation worker stopped")] * 3
        assert "stopped on an error" in caplog.text and "the admission broke" in caplog.text
        with pytest.raises(EngineStoppedError):
            engine.submit(prompt, sampling)
    finally:
        engine.stop()
