"""The engine loop in lockstep across a distributed group: rank 0 decides, every rank steps.

Each loop iteration rank 0's engine reads its command queue (admissions, cancels, a stop; the
wait for a burst and the choice of the solo path are made there, on rank 0 only) and posts what
it read (`Leader.send`) before the step's forward pass; the other ranks' engines take the same
commands from the group instead of a queue (`Follower.receive`). Pipelined (channel.py): what
rank 0 read in one iteration runs in the next on every rank, rank 0 included, so no rank waits
for the message (an idle rank 0 that just read a request runs the next iteration at once).
Everything else an engine decides follows from its commands and the tokens it samples,
identical on every rank (the ranks' random state is seeded alike at the handshake), so nothing
is sent per token.

An admission crosses as its prompt tokens, sampling parameters (seed included), checkpoints,
scope and the specs of its logits processors (service/models/processors.py), which the other
ranks build again; a stream crosses as a number. An idle rank 0 sends an empty message every
`heartbeat` seconds, so a rank that died or stalled is found within `timeout` even with no
traffic: a collective that fails, or no message for `timeout`, breaks the link (`listen`).

Idle, rank 0 parks the others (channel.py, doorbell.py): `settle` seconds after its engine has
nothing left to run, its empty message says it goes idle, and the others wait on a blocking
socket rather than in a collective (where MLX's `ring` backend spins a core) until rank 0 rings
before its next message: its next command, or its heartbeat.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, cast

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.commands import Cancel, Submit
from mlx_responses.service.engine.distributed import doorbell
from mlx_responses.service.engine.distributed.channel import Channel, ChannelError
from mlx_responses.service.engine.distributed.link import Engine
from mlx_responses.service.engine.model_thread import Stop
from mlx_responses.service.engine.requests import Chunk, LogitsProcessor, SamplingParams
from mlx_responses.service.engine.stream import GenerationStream

log = logging.getLogger(__name__)

Command = Submit | Cancel | Stop
# The spec of each logits processor, as service/models/processors.py tags them.
REPLAY = "replay"
# How long an idle rank 0 waits for a command before it parks the other ranks (a client's next
# request often follows its last answer at once).
SETTLE = 0.05


class GroupLost(RuntimeError):
    """A rank of the group died or stalled: the link is broken for good."""


class _Link:
    """What both ends share: the channel, the watchdog and the listeners of a break."""

    def __init__(self, channel: Channel, timeout: float) -> None:
        self.channel = channel
        self.timeout = timeout
        # How long an idle rank 0 waits for a command before it sends an empty message.
        self._heartbeat = max(0.05, timeout / 4)
        # What rank 0 posted last iteration: it runs this one.
        self._held: tuple[list[Command], bool] = ([], True)
        self.broken: str | None = None
        self._listeners: list[Callable[[str], object]] = []
        self._last = time.monotonic()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._watchdog: threading.Thread | None = None

    @property
    def heartbeat(self) -> float:
        """How long an idle rank 0 waits for a command: none while commands it posted wait to
        run (the next iteration runs them at once); `SETTLE` before it parks the others."""
        if self._held[0]:
            return 0.0
        if self.channel.parks and not self.channel.parked:
            return min(SETTLE, self._heartbeat)
        return self._heartbeat

    @property
    def rank(self) -> int:
        return self.channel.rank

    def listen(self, callback: Callable[[str], object]) -> None:
        """Calls `callback(reason)` once when the link breaks (from whichever thread found it);
        at once if it is broken already."""
        with self._lock:
            broken = self.broken
            if broken is None:
                self._listeners.append(callback)
        if broken is not None:
            callback(broken)

    def start(self) -> None:
        """Starts the watchdog (after the model loaded: loading is not a step)."""
        self._last = time.monotonic()
        if self._watchdog is None:
            self._watchdog = threading.Thread(
                target=self._watch, name=f"mlx-lockstep-watchdog-{self.rank}", daemon=True
            )
            self._watchdog.start()

    def close(self) -> None:
        """The engine stopped in order (a stop crossed): no more messages are expected."""
        self._closed.set()
        if self.channel.bell is not None:
            self.channel.bell.close()

    def handshake(self, fingerprint: dict[str, Any]) -> None:
        """On the engine thread, after the load: rank 0 sends a seed for MLX's random state and
        its engine settings; every rank seeds alike and checks the settings match its own (a
        mismatch would step different batches), and all learn whether every rank agreed."""
        seed = secrets.randbits(63)  # rank 0's is the one every rank takes
        token, host = secrets.token_hex(16), doorbell.rank0_host()
        server = None
        if self.rank == 0:
            try:
                if host is None:
                    raise OSError("rank 0's address in the group is unknown (mpi?)")
                server = doorbell.listen(host)
            except OSError as exc:
                log.warning("no doorbell (idle ranks will spin): %s", exc)
        port = server.getsockname()[1] if server is not None else 0
        wire = {"seed": seed, "settings": fingerprint, "bell": port, "token": token}
        got = json.loads(self.channel.exchange(json.dumps(wire, sort_keys=True).encode(), mx.cpu))
        agree = got["settings"] == fingerprint
        bell = self._ring_up(server, host, got)
        if not agree:
            log.error(
                "rank %d: engine settings differ from rank 0's: %s here, %s there",
                self.rank,
                fingerprint,
                got["settings"],
            )
        summed = mx.distributed.all_sum(
            mx.array([int(agree), int(bell is not None)]), group=self.channel.group, stream=mx.cpu
        )
        votes = [int(v) for v in np.asarray(summed)]
        if votes[1] == self.channel.size:
            self.channel.bell = bell
        elif bell is not None:
            bell.close()
        if votes[0] != self.channel.size:
            raise GroupLost(
                "the ranks were started with different engine settings (each rank must run "
                "the same command line)"
            )
        mx.random.seed(int(got["seed"]))

    def _ring_up(
        self, server: Any, host: str | None, got: dict[str, Any]
    ) -> doorbell.Doorbell | None:
        """The doorbell's connections (rank 0 accepts, the others connect), or None where the
        group has none (every rank must have its own for rank 0 to park them)."""
        try:
            if server is not None:
                return doorbell.Doorbell.accept(
                    server, self.channel.size - 1, got["token"], doorbell.CONNECT_TIMEOUT
                )
            if self.rank != 0 and host is not None and got["bell"]:
                return doorbell.Doorbell.connect(host, int(got["bell"]), got["token"], self.timeout)
        except OSError as exc:
            log.warning("rank %d: no doorbell (idle ranks will spin): %s", self.rank, exc)
        return None

    def _beat(self) -> None:
        self._last = time.monotonic()

    def _watch(self) -> None:
        while not self._closed.wait(self._heartbeat):
            quiet = time.monotonic() - self._last
            if quiet > self.timeout:
                self._break(
                    f"the distributed group stalled: no step completed in {quiet:.1f}s "
                    f"(--distributed-timeout {self.timeout:g}s)"
                )
                return

    def _break(self, reason: str) -> None:
        with self._lock:
            if self.broken is not None:
                return
            self.broken = reason
            listeners, self._listeners = self._listeners, []
        self._closed.set()
        if self.channel.bell is not None:  # a parked rank hears it at once
            self.channel.bell.close()
        log.error("rank %d: %s", self.rank, reason)
        self._on_break(reason)
        for callback in listeners:
            try:
                callback(reason)
            except Exception:
                log.exception("a listener of the distributed link failed")

    def _on_break(self, reason: str) -> None:
        """The end's own part of a break."""

    def send(
        self, commands: Sequence[Command], alone: bool, stream: Any, busy: bool = True
    ) -> tuple[list[Command], bool]:
        raise TypeError("only rank 0 sends")

    def receive(self, stream: Any) -> tuple[list[Command], bool]:
        raise TypeError("rank 0 does not receive")


class Leader(_Link):
    """Rank 0's end: sends what its engine read each iteration."""

    follows = False

    def __init__(self, channel: Channel, timeout: float) -> None:
        super().__init__(channel, timeout)
        self._ids = iter(range(1, 1 << 62))
        # Streams in flight by number (weakly: a finished stream's number goes with it).
        self._streams: weakref.WeakValueDictionary[int, GenerationStream] = (
            weakref.WeakValueDictionary()
        )
        self._numbers: weakref.WeakKeyDictionary[GenerationStream, int] = (
            weakref.WeakKeyDictionary()
        )
        self._worker: Engine | None = None

    def attach(self, worker: Engine) -> None:
        """The engine whose requests fail when the link breaks."""
        self._worker = worker

    def send(
        self, commands: Sequence[Command], alone: bool, stream: Any, busy: bool = True
    ) -> tuple[list[Command], bool]:
        """Posts `commands` and the solo decision to every rank, queued on `stream` after the
        work already there, and returns what it posted last iteration: every rank runs that
        now. Idle (not `busy`, nothing read, nothing left to run), it parks the others.
        Raises GroupLost when the group is lost (for good)."""
        if self.broken is not None:
            raise GroupLost(self.broken)
        try:
            payload = self._encode(commands, alone) if commands else b""
            park = self.channel.parks and not (busy or commands or self._held[0])
            self.channel.post(payload, stream, park)
            held, self._held = self._held, (list(commands), alone)
            if any(isinstance(c, Stop) for c in held[0]):
                self.channel.wait()
                self.close()
        except Exception as exc:
            self._break(f"the distributed group failed: {exc}")
            raise GroupLost(str(exc)) from exc
        self._beat()
        return held

    def _encode(self, commands: Sequence[Command], alone: bool) -> bytes:
        wire: list[Any] = [alone]
        for command in commands:
            if isinstance(command, Submit):
                # NOTE: a group's prompt caches keep no client lifetimes: expiry reads each
                # rank's own clock, so the ranks could disagree on a hit (LRU alone agrees).
                command.retention = None
                number = next(self._ids)
                self._streams[number] = command.stream
                self._numbers[command.stream] = number
                specs = [getattr(p, REPLAY) for p in command.logits_processors]
                wire.append(
                    [
                        "s",
                        number,
                        command.prompt,
                        dataclasses.asdict(command.sampling),
                        list(command.checkpoints),
                        command.scope,
                        specs,
                    ]
                )
            elif isinstance(command, Cancel):
                if (known := self._numbers.get(command.stream)) is not None:
                    wire.append(["c", known])
            else:
                wire.append(["x", command.release])
        return json.dumps(wire, separators=(",", ":")).encode()

    def _on_break(self, reason: str) -> None:
        """Refuses new requests and fails those in flight (`response.failed`): their engine may
        never answer again (a stalled collective does not return)."""
        if self._worker is not None:
            self._worker.alive = False
        for stream in list(self._streams.values()):
            if not stream.finished:
                chunk = Chunk("", 0, "error", error=reason)
                stream._loop.call_soon_threadsafe(stream.deliver, chunk)


class _Inline:
    """The "loop" of the other ranks' streams: the outbox's deliveries run at once on the engine
    thread (they only mark a stream finished), so no event loop wakes up each step."""

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: Any) -> None:
        callback(*args)


class FollowerStream(GenerationStream):
    """A stream on another rank: what its engine generates is computed and dropped."""

    def deliver(self, chunk: Chunk) -> None:
        if chunk.finish_reason is not None:
            self.finished = True


class Follower(_Link):
    """Another rank's end: its engine's commands come from rank 0."""

    follows = True

    def __init__(
        self,
        channel: Channel,
        timeout: float,
        rebuild: Callable[[list[list[Any]]], list[LogitsProcessor]],
    ) -> None:
        super().__init__(channel, timeout)
        self._rebuild = rebuild
        self._streams: dict[int, GenerationStream] = {}
        self._new_stream: Callable[[], GenerationStream] | None = None

    def attach(self, worker: Engine) -> None:
        """The engine these commands are for."""
        inline = cast(asyncio.AbstractEventLoop, _Inline())
        self._new_stream = lambda: FollowerStream(worker, inline)

    def receive(self, stream: Any) -> tuple[list[Command], bool]:
        """The commands rank 0 read last iteration and its solo decision (blocks until they
        come: rank 0 runs them now too); raises GroupLost when the group is lost."""
        if self.broken is not None:
            raise GroupLost(self.broken)
        try:
            payload = self.channel.collect(stream)
            commands, alone = self._decode(payload) if payload else ([], True)
        except Exception as exc:
            self._break(f"the distributed group failed: {exc}")
            raise GroupLost(str(exc)) from exc
        self._beat()
        if any(isinstance(c, Stop) for c in commands):
            self.close()
        return commands, alone

    def _decode(self, payload: bytes) -> tuple[list[Command], bool]:
        try:
            alone, *wire = json.loads(payload)
        except ValueError as exc:
            raise ChannelError(f"a message from rank 0 does not decode: {exc}") from exc
        for number in [n for n, s in self._streams.items() if s.finished]:
            del self._streams[number]
        commands: list[Command] = []
        for item in wire:
            if item[0] == "s":
                _, number, prompt, sampling, checkpoints, scope, specs = item
                assert self._new_stream is not None, "attach() first"
                stream = self._streams[number] = self._new_stream()
                commands.append(
                    Submit(
                        stream,
                        prompt,
                        SamplingParams(**sampling),
                        self._rebuild(specs),
                        tuple(checkpoints),
                        scope=scope,
                    )
                )
            elif item[0] == "c":
                if (known := self._streams.get(item[1])) is not None:
                    commands.append(Cancel(known))
            else:
                commands.append(Stop(release=bool(item[1])))
        return commands, bool(alone)
