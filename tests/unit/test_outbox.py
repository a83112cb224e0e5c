"""The engine's outbox: coalescing window per stream, one wake-up per loop."""

from __future__ import annotations

import asyncio

from mlx_responses.service.engine.outbox import MAX_DELTAS_PER_SECOND, MAX_WIDENED_WINDOW, Outbox
from mlx_responses.service.engine.requests import Chunk


class Sink:
    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    def deliver(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)


def token(text: str, i: int, finish: str | None = None) -> Chunk:
    return Chunk(text, 1, finish, token_ids=(i,))


async def drained() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_first_token_leaves_alone_then_tokens_merge_until_the_window_passes() -> None:
    loop = asyncio.get_running_loop()
    outbox: Outbox[Sink] = Outbox(window=0.010)
    sink = Sink()
    words = ["a", " b", " c", " d", " e", " f"]
    outbox.put(sink, loop, token(words[0], 0), now=0.000)  # first: at once
    outbox.put(sink, loop, token(words[1], 1), now=0.001)  # held from 0.001
    outbox.put(sink, loop, token(words[2], 2), now=0.005)
    outbox.flush(now=0.006)  # not yet 10 ms
    await drained()
    assert [c.text for c in sink.chunks] == ["a"]
    outbox.put(sink, loop, token(words[3], 3), now=0.0115)  # 10.5 ms after the oldest held
    await drained()
    assert [c.text for c in sink.chunks] == ["a", " b c d"]
    assert sink.chunks[1].tokens == 3 and sink.chunks[1].token_ids == (1, 2, 3)
    outbox.put(sink, loop, token(words[4], 4), now=0.012)
    outbox.put(sink, loop, token(words[5], 5, "length"), now=0.013)  # a finish never waits
    await drained()
    assert [c.text for c in sink.chunks] == ["a", " b c d", " e f"]
    assert sink.chunks[-1].finish_reason == "length"
    assert "".join(c.text for c in sink.chunks) == "".join(words)


async def test_flush_sends_what_waited_a_whole_window() -> None:
    loop = asyncio.get_running_loop()
    outbox: Outbox[Sink] = Outbox(window=0.010)
    sink = Sink()
    outbox.put(sink, loop, token("x", 0), now=0.0)
    outbox.put(sink, loop, token("y", 1), now=0.002)
    outbox.flush(now=0.013)
    await drained()
    assert [c.text for c in sink.chunks] == ["x", "y"]


async def test_no_window_sends_every_chunk_and_wakes_the_loop_once_while_it_is_behind() -> None:
    loop = asyncio.get_running_loop()
    outbox: Outbox[Sink] = Outbox(window=0.0)
    sinks = [Sink(), Sink()]
    for step in range(3):  # three engine steps before the loop gets to run
        for i, sink in enumerate(sinks):
            outbox.put(sink, loop, token(f"{step}", i), now=float(step))
    assert outbox.sent_chunks == 6 and outbox.wakeups == 1
    await drained()
    assert [c.text for c in sinks[0].chunks] == ["0", "1", "2"]
    outbox.put(sinks[0], loop, token("3", 0, "stop"), now=4.0)
    assert outbox.wakeups == 2  # the loop caught up: the next chunk wakes it again
    await drained()
    assert sinks[0].chunks[-1].finish_reason == "stop"


async def test_a_cancelled_stream_gets_what_it_held_with_its_final_chunk() -> None:
    loop = asyncio.get_running_loop()
    outbox: Outbox[Sink] = Outbox(window=1.0)
    sink = Sink()
    outbox.put(sink, loop, token("a", 0), now=0.0)
    outbox.put(sink, loop, token("b", 1), now=0.1)
    outbox.put(sink, loop, Chunk("", 0, "cancelled"), now=0.2)
    await drained()
    assert [(c.text, c.finish_reason) for c in sink.chunks] == [("a", None), ("b", "cancelled")]


async def test_a_chunk_leaves_once_it_holds_max_tokens() -> None:
    loop = asyncio.get_running_loop()
    outbox: Outbox[Sink] = Outbox(window=1.0, max_tokens=3)
    sink = Sink()
    for i in range(8):
        outbox.put(sink, loop, token(f" {i}", i), now=i * 0.001)
    await drained()
    assert [c.tokens for c in sink.chunks] == [1, 3, 3]  # the first alone, then 3 at a time
    assert "".join(c.text for c in sink.chunks) == " 0 1 2 3 4 5 6"


async def test_the_window_widens_with_the_streams_decoding() -> None:
    """32 streams at most ~400 deltas a second in all: an 80 ms window instead of 10."""
    loop = asyncio.get_running_loop()
    outbox: Outbox[Sink] = Outbox(window=0.010)
    sink = Sink()
    outbox.streams = 32
    widened = 32 / MAX_DELTAS_PER_SECOND
    assert outbox.effective_window == widened == 0.08
    outbox.put(sink, loop, token("x", 0), now=0.0)  # the first token never waits
    outbox.put(sink, loop, token("y", 1), now=0.001)
    outbox.flush(now=0.030)
    await drained()
    assert [c.text for c in sink.chunks] == ["x"]
    outbox.flush(now=0.001 + widened)
    await drained()
    assert [c.text for c in sink.chunks] == ["x", "y"]
    outbox.streams = 4  # few streams: the configured window again
    assert outbox.effective_window == 0.010
    outbox.streams = 64  # many: never past the cap, a stream's updates at least 10 a second
    assert outbox.effective_window == MAX_WIDENED_WINDOW == 0.1
    assert Outbox(window=0.25).effective_window == 0.25  # a wider window given stays
    assert Outbox(window=0.0).effective_window == 0.0  # off stays off
