"""The lockstep links without a group: what rank 0 sends, the other ranks rebuild exactly
(prompts, sampling, checkpoints, scopes, logits processors, cancels, a stop, the solo
decision); a stalled step trips the watchdog (requests in flight fail, the engine refuses new
ones, listeners hear it); a lost peer breaks the link for good."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine.commands import Cancel, Submit
from mlx_responses.service.engine.distributed.lockstep import SETTLE, Follower, GroupLost, Leader
from mlx_responses.service.engine.model import LoadedModel, load_model
from mlx_responses.service.engine.model_thread import Stop
from mlx_responses.service.engine.requests import Chunk, SamplingParams
from mlx_responses.service.engine.stream import GenerationStream
from mlx_responses.service.models.processors import REPLAY, build_processors, request_specs
from mlx_responses.service.text.grammars import GrammarFactory

from tests.support.waits import until_async

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Loopback:
    """A pipelined channel to itself (channel.py's post/collect): the other end collects rank
    0's messages in order, the first collect (nothing posted a step before) finding none."""

    bell = None
    parks = False
    parked = False

    def __init__(self, rank: int, queue: list[bytes]) -> None:
        self.rank, self.size, self.group = rank, 2, None
        self.queue = queue
        self.collected = False

    def post(self, payload: bytes, stream: Any, park: bool = False) -> None:
        self.queue.append(payload)
        self.parked = park

    def collect(self, stream: Any) -> bytes | None:
        if not self.collected:
            self.collected = True
            return None
        return self.queue.pop(0)

    def wait(self) -> None:
        pass


class Engine:
    """What the links touch of an engine: `alive`, and `cancel` for its streams."""

    alive = True

    def cancel(self, stream: GenerationStream) -> None:
        pass


@pytest.fixture(scope="module")
def loaded(model_path: Path) -> LoadedModel:
    return load_model(model_path)


def _rebuild(loaded: LoadedModel) -> Any:
    grammars = GrammarFactory(loaded.tokenizer._tokenizer, loaded.vocab_size)
    return lambda specs: build_processors(specs, loaded, grammars)


async def test_what_rank_0_sends_the_others_rebuild(loaded: LoadedModel) -> None:
    loop = asyncio.get_running_loop()
    grammars = GrammarFactory(loaded.tokenizer._tokenizer, loaded.vocab_size)
    grammar = grammars.json_schema(SCHEMA)
    specs = request_specs(loaded, presence_penalty=0.5, frequency_penalty=0.25, grammar=grammar)
    processors = build_processors(specs, loaded, grammars, grammar)
    queue: list[bytes] = []
    leader = Leader(Loopback(0, queue), 5.0)  # type: ignore[arg-type]
    follower = Follower(Loopback(1, queue), 5.0, _rebuild(loaded))  # type: ignore[arg-type]
    follower.attach(Engine())  # type: ignore[arg-type]
    stream = GenerationStream(Engine(), loop)
    sampling = SamplingParams(9, temperature=0.7, top_p=0.9, logprobs=2, top_k=5, seed=11)
    submit = Submit(stream, [5, 6, 7, 8], sampling, processors, (2, 3), scope="key")
    # What rank 0 posts runs an iteration later, on rank 0 as on the others.
    assert leader.send([submit], False, None) == ([], True)
    assert leader.heartbeat == 0  # idle, it runs the next iteration at once
    assert leader.send([Cancel(stream), Stop(release=True)], True, None) == ([submit], False)
    assert leader.send([], True, None)[0][1] == Stop(release=True)  # an idle heartbeat's
    assert leader.heartbeat == 1.25

    assert follower.receive(None) == ([], True)
    (got,), alone = follower.receive(None)
    assert alone is False
    assert isinstance(got, Submit)
    assert (got.prompt, got.sampling, got.checkpoints, got.scope) == (
        [5, 6, 7, 8],
        sampling,
        (2, 3),
        "key",
    )
    assert [getattr(p, REPLAY) for p in got.logits_processors] == specs
    assert [type(p) for p in got.logits_processors] == [type(p) for p in processors]
    # The rebuilt processors change logits as rank 0's do (the grammar's mask included).
    tokens, logits = mx.array([[5, 6, 7, 8]]), mx.random.normal((1, loaded.vocab_size))
    ours, theirs = logits, logits
    for mine, rebuilt in zip(processors, got.logits_processors, strict=True):
        ours, theirs = mine(tokens, ours), rebuilt(tokens, theirs)
    assert mx.array_equal(ours, theirs).item()
    cancel, stop = follower.receive(None)[0]
    assert isinstance(cancel, Cancel) and cancel.stream is got.stream
    assert isinstance(stop, Stop) and stop.release
    assert follower.receive(None) == ([], True)


async def test_a_stalled_step_fails_the_requests_in_flight(loaded: LoadedModel) -> None:
    """The step after rank 0's send never ends (a rank stopped): within the timeout the
    streams in flight get an error chunk, the engine refuses new requests, listeners hear."""
    loop = asyncio.get_running_loop()
    leader = Leader(Loopback(0, []), 0.3)  # type: ignore[arg-type]
    engine = Engine()
    leader.attach(engine)  # type: ignore[arg-type]
    stream = GenerationStream(engine, loop)
    heard: list[str] = []
    leader.listen(heard.append)
    leader.start()
    leader.send([Submit(stream, [1, 2], SamplingParams(4), [])], True, None)
    leader.send([], True, None)  # the admission runs, and its step never ends
    chunk: Chunk = await asyncio.wait_for(stream._queue.get(), 5)
    assert chunk.finish_reason == "error" and "stalled" in (chunk.error or "")
    assert engine.alive is False
    await until_async(lambda: heard, "the listeners hear it (right after the streams)")
    assert len(heard) == 1 and "--distributed-timeout" in heard[0]
    with pytest.raises(GroupLost):
        leader.send([], True, None)
    late: list[str] = []
    leader.listen(late.append)  # a listener that comes late hears it at once
    assert late == heard


def test_a_lost_peer_breaks_the_link_for_good(loaded: LoadedModel) -> None:
    class Lost(Loopback):
        def collect(self, stream: Any) -> bytes:
            raise RuntimeError("[ring] connection to a peer was lost")

    follower = Follower(Lost(1, []), 5.0, _rebuild(loaded))  # type: ignore[arg-type]
    heard = threading.Event()
    follower.listen(lambda reason: heard.set())
    with pytest.raises(GroupLost, match="peer was lost"):
        follower.receive(None)
    assert heard.is_set()
    with pytest.raises(GroupLost):
        follower.receive(None)


def test_an_idle_rank_0_parks_the_others_and_wakes_them_for_work() -> None:
    """Rank 0 parks the other ranks (channel.py) only when its engine is idle, nothing was read
    and nothing it posted waits to run; it waits a moment (SETTLE) before parking, then its
    heartbeat; a command wakes them (the channel rings before the message)."""

    class Parking(Loopback):
        parks = True

        def __init__(self) -> None:
            super().__init__(0, [])
            self.flags: list[bool] = []

        def post(self, payload: bytes, stream: Any, park: bool = False) -> None:
            super().post(payload, stream, park)
            self.flags.append(park)

    loop = asyncio.new_event_loop()
    channel = Parking()
    leader = Leader(channel, 4.0)  # type: ignore[arg-type]
    submit = Submit(GenerationStream(Engine(), loop), [1, 2], SamplingParams(4), [])
    assert leader.heartbeat == SETTLE  # idle, the others not parked yet
    leader.send([], True, None, busy=True)  # decoding: never parked
    leader.send([], True, None, busy=False)  # idle: parked
    assert leader.heartbeat == 1.0  # parked: the heartbeat's wait
    leader.send([], True, None, busy=False)  # the heartbeat wakes them and parks them again
    leader.send([submit], True, None, busy=False)  # a request: not parked
    assert leader.heartbeat == 0.0  # the request runs next iteration, at once
    leader.send([], True, None, busy=False)  # the request runs now: not parked
    assert leader.heartbeat == SETTLE
    leader.send([], True, None, busy=False)
    assert channel.flags == [False, True, True, False, False, True]
    loop.close()
