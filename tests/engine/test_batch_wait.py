"""`--batch-wait-ms`: an idle engine waits for a burst's other requests and starts them as one
batch; without it the first starts alone and is handed to the batch at the second."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import EngineStats, SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import collect, generate, greedy

TOKENS = 48
TEXTS = ("Count forever", "hello there my friend", "one two three")


async def _burst(
    random_model: Path, batch_wait: float
) -> tuple[list[tuple[int, ...]], EngineStats]:
    """Three requests 5 ms apart on an idle engine; their tokens and the engine's counters."""
    engine = EngineWorker(
        lambda: load_model(random_model), stream_window=0.0, batch_wait=batch_wait
    )
    loaded = await engine.start()
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    try:
        streams = []
        for text in TEXTS:
            streams.append(engine.submit(loaded.tokenizer.encode(text), sampling))
            await asyncio.sleep(0.005)
        outputs = await asyncio.gather(*(collect(stream) for stream in streams))
    finally:
        engine.stop()
    return list(outputs), engine.stats


@pytest.mark.parametrize("batch_wait", [0.0, 0.05])
async def test_a_burst_on_an_idle_engine_starts_as_one_batch_with_the_wait(
    random_model: Path, batch_wait: float
) -> None:
    alone = [(await generate(random_model, greedy([text], TOKENS)))[0][0] for text in TEXTS]
    outputs, stats = await _burst(random_model, batch_wait)
    assert outputs == alone  # the same tokens however they were admitted
    if batch_wait:
        # All three waited for each other: one prefill, no sequence alone, no hand-over.
        assert stats.solo_sequences == 0 and stats.handovers == 0
        assert stats.max_batch_seen == 3
    else:
        # The first started alone and was handed to the batch when the second came.
        assert stats.solo_sequences >= 1 and stats.handovers >= 1


async def test_a_lone_request_waits_once_and_decodes_alone(random_model: Path) -> None:
    """Nothing else comes: after the wait the request takes the solo path as before."""
    engine = EngineWorker(lambda: load_model(random_model), stream_window=0.0, batch_wait=0.02)
    loaded = await engine.start()
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        stream = engine.submit(
            loaded.tokenizer.encode(TEXTS[0]), SamplingParams(max_tokens=4, temperature=0.0)
        )
        first = None
        async for chunks in stream.batches():
            if first is None and any(chunk.tokens for chunk in chunks):
                first = loop.time() - start
    finally:
        engine.stop()
    assert first is not None and first >= 0.02  # it waited for company
    assert engine.stats.solo_sequences == 1 and engine.stats.handovers == 0


async def test_requests_that_come_while_others_are_admitted_join_their_first_step(
    random_model: Path,
) -> None:
    """Admitting takes time (an image request's vision tower runs then): what is queued when
    an admission pass ends is admitted before the step, so all start in one step instead of
    the late ones a step behind the first."""
    engine = EngineWorker(lambda: load_model(random_model), stream_window=0.0)
    loaded = await engine.start()
    loop = asyncio.get_running_loop()
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    late: list[Any] = []
    queued = threading.Event()
    start = engine._start

    def admitting(*args: Any) -> None:  # on the engine's thread
        start(*args)
        if not late:  # the first pass: three more come meanwhile
            late.append(None)
            loop.call_soon_threadsafe(arrive)
            assert queued.wait(10)

    def arrive() -> None:
        late[:] = [engine.submit(loaded.tokenizer.encode(t), sampling) for t in TEXTS]
        queued.set()

    engine._start = admitting  # type: ignore[method-assign]
    try:
        first = engine.submit(loaded.tokenizer.encode("And one before them"), sampling)
        outputs = await asyncio.gather(collect(first), *(collect(s) for s in await _filled(late)))
    finally:
        engine.stop()
    alone = [(await generate(random_model, greedy([text], TOKENS)))[0][0] for text in TEXTS]
    assert list(outputs[1:]) == alone
    # All four started in one step and ended in one: a step per token (the late ones joining
    # at the second step took one more).
    assert engine.stats.max_batch_seen == 4
    assert engine.stats.decode_steps == TOKENS


async def _filled(late: list[Any]) -> list[Any]:
    """The late streams, once the engine's thread has had them submitted."""
    while len(late) < len(TEXTS):
        await asyncio.sleep(0.001)
    return late
