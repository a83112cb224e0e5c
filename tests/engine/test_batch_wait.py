"""`--batch-wait-ms`: an idle engine waits for a burst's other requests and starts them as one
batch; without it the first starts alone and is handed to the batch at the second."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import EngineStats, SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import collect, generate, greedy

TOKENS = 48
TEXTS = ("Count forever", "hello there my friend", "one two three")


class _Company:
    """The engine's command queue, with a burst's later requests arriving while the engine
    waits for company (`batch_wait`: a read with a timeout): each such read first has the next
    request submitted (`send`, on the event loop) and then takes it, so each arrives within the
    wait however slow the machine; with none left to send the wait passes at once, empty, as it
    would at its end. `timeouts`: the waits the engine took, each its timeout."""

    def __init__(self, commands: Any, send: list[Callable[[], None]]) -> None:
        self._commands = commands
        self._send = send
        self.timeouts: list[float] = []

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if timeout is None:
            return self._commands.get(block)
        self.timeouts.append(timeout)
        if self._send:
            self._send.pop(0)()
        if not self._commands.qsize():
            raise queue.Empty
        return self._commands.get_nowait()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._commands, name)


async def _burst(
    random_model: Path, batch_wait: float
) -> tuple[list[tuple[int, ...]], EngineStats]:
    """Three requests on an idle engine, their tokens and the engine's counters. With a wait,
    the second and third arrive while it waits for company (`_Company`); without one, once the
    first is decoding."""
    engine = EngineWorker(
        lambda: load_model(random_model), stream_window=0.0, batch_wait=batch_wait
    )
    loaded = await engine.start()
    loop = asyncio.get_running_loop()
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    streams: list[Any] = []

    async def submit(text: str) -> None:
        streams.append(engine.submit(loaded.tokenizer.encode(text), sampling))

    def arrive(text: str) -> Callable[[], None]:  # on the engine's thread, as it waits
        return lambda: asyncio.run_coroutine_threadsafe(submit(text), loop).result(60)

    try:
        if batch_wait:
            engine._commands = _Company(engine._commands, [arrive(t) for t in TEXTS[1:]])  # type: ignore[assignment]
        await submit(TEXTS[0])
        first = asyncio.create_task(collect(streams[0]))
        if not batch_wait:
            while not engine.stats.generated_tokens:  # the first decodes alone
                await asyncio.sleep(0.001)
            for text in TEXTS[1:]:
                await submit(text)
        while len(streams) < len(TEXTS) and not first.done():
            await asyncio.sleep(0.001)
        for text in TEXTS[len(streams) :]:  # an engine that never waited: they come after
            await submit(text)
        outputs = [await first, *await asyncio.gather(*(collect(s) for s in streams[1:]))]
    finally:
        engine.stop()
    return outputs, engine.stats


# A wait long enough never to end on its own: `_Company` ends it once the burst is in.
WAIT = 60.0


@pytest.mark.parametrize("batch_wait", [0.0, WAIT])
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
    """Nothing else comes: after one wait for company (`batch_wait`, its whole length) the
    request takes the solo path as before."""
    engine = EngineWorker(lambda: load_model(random_model), stream_window=0.0, batch_wait=WAIT)
    loaded = await engine.start()
    company = engine._commands = _Company(engine._commands, [])  # type: ignore[assignment]
    try:
        stream = engine.submit(
            loaded.tokenizer.encode(TEXTS[0]), SamplingParams(max_tokens=4, temperature=0.0)
        )
        assert len(await collect(stream)) == 4
        assert company.timeouts == [WAIT]  # it waited for company, once
    finally:
        engine.stop()
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
