"""Bytes from rank 0 to every rank over MLX's collectives (MLX has no broadcast: an all_sum
where the other ranks add zeros).

A message is one fixed-size collective when it fits its header (the common case: an empty or
small step) and a second one, of the length the header announced, when it does not.

Two ways to use it: `exchange` (rank 0 sends, the others wait for it: the handshake), and
`post`/`collect`, pipelined for the engine loop: each iteration every rank queues the next
header collective without waiting for it, and reads the one queued an iteration earlier, long
done by then; so the message costs the loop no wait of its own (on one machine, the bundled
model's decode step: +4-7% with a wait per step, none measurable pipelined), and what rank 0
posts runs one iteration later on every rank. A long message's rest follows in the next
iteration, before that iteration's header, on every rank.

Parked (`post(..., park=True)`, where the group has a doorbell: doorbell.py): an idle rank 0
flags its message so, and the other ranks queue no next header after it: they wait on their
doorbell (a blocking socket) instead of in a collective, which MLX's `ring` backend waits for
by spinning a core. Rank 0 rings before its next message; they read its header at once (the
one collective they wait for) and go on pipelined.
"""

from __future__ import annotations

from typing import Any, Protocol

import mlx.core as mx
import numpy as np

# Bytes of the first collective: a 4-byte length, then as much of the message as fits.
HEADER_BYTES = 512
_INLINE = HEADER_BYTES - 4
# The length's top bit: rank 0 goes idle after this message (the others park on the doorbell).
_PARK = 1 << 31


class ChannelError(RuntimeError):
    """The group failed under a collective (a peer lost, a message that does not decode)."""


class Bell(Protocol):
    """What parked ranks wait on (doorbell.py's `Doorbell`): rank 0 rings, another rank waits
    for a ring; either raises ChannelError when the other end is gone."""

    def ring(self) -> None: ...

    def wait(self) -> None: ...

    def close(self) -> None: ...


class Channel:
    """Rank 0 sends, every rank (rank 0 included) receives the same bytes, in the same order."""

    def __init__(self, group: Any) -> None:
        self.group = group
        self.rank: int = group.rank()
        self.size: int = group.size()
        # What rank 0 sent last and did not wait for (kept alive until the next send).
        self._pending: list[mx.array] = []
        # Pipelined: rank 0's last posted message (its rest goes next), and the other ranks'
        # header collective queued last iteration.
        self._posted = b""
        self._queued: mx.array | None = None
        # An empty message's header, and what the other ranks add: zeros (most steps say
        # nothing; one array, made on the MLX thread at its first use, spares each a copy).
        self._zeros_made: mx.array | None = None
        # Where the group has one (the handshake set it up): what parked ranks wait on, and
        # whether they wait on it now.
        self.bell: Bell | None = None
        self.parked = False

    @property
    def parks(self) -> bool:
        """Whether rank 0 may park the others (the group has a doorbell)."""
        return self.bell is not None

    def send(self, payload: bytes, stream: Any = None) -> None:
        """Rank 0: queues `payload` to every rank and returns without waiting for it (the
        collective runs after the work already queued on `stream`, in the order every rank
        queued it)."""
        assert self.rank == 0
        self.wait()
        sent = [self._sum(self._header(payload), stream)]
        # NOTE: one async_eval per collective, in order: arrays evaluated together may run in
        # any order, and every rank must run its collectives in the same one.
        mx.async_eval(sent[0])
        if len(payload) > _INLINE:
            rest = np.frombuffer(payload[_INLINE:], dtype=np.uint8).copy()
            sent.append(self._sum(mx.array(rest), stream))
            mx.async_eval(sent[1])
        self._pending = sent

    def receive(self, stream: Any = None) -> bytes:
        """Another rank: the next message rank 0 sent (blocks until it comes)."""
        assert self.rank != 0
        head = np.asarray(self._sum(self._zeros, stream))
        length = int.from_bytes(head[:4].tobytes(), "little")
        data = head[4 : 4 + min(length, _INLINE)].tobytes()
        if length > _INLINE:
            rest = self._sum(mx.zeros(length - _INLINE, dtype=mx.uint8), stream)
            data += np.asarray(rest).tobytes()
        return data

    def exchange(self, payload: bytes, stream: Any = None) -> bytes:
        """Rank 0's `payload` on every rank: rank 0 sends it (and gets it back), the others
        receive it; `payload` is ignored on the others."""
        if self.rank == 0:
            self.send(payload, stream)
            return payload
        return self.receive(stream)

    def post(self, payload: bytes, stream: Any = None, park: bool = False) -> None:
        """Rank 0, pipelined: queues the rest of the message posted last (if it was long), then
        `payload`'s header, without waiting for either (`collect` on the other ranks). `park`:
        rank 0 goes idle after this (empty) message; the others wait on the doorbell, which
        the next post rings first."""
        assert self.rank == 0
        assert not park or (self.bell is not None and not payload)
        self.wait()  # what went last iteration is long done; a failure surfaces here
        if self.parked and self.bell is not None:
            self.bell.ring()
            self.parked = False
        sent = []
        if len(self._posted) > _INLINE:
            rest = np.frombuffer(self._posted[_INLINE:], dtype=np.uint8).copy()
            sent.append(self._sum(mx.array(rest), stream))
            mx.async_eval(sent[-1])
        sent.append(self._sum(self._header(payload, park), stream))
        mx.async_eval(sent[-1])
        self._pending, self._posted = sent, payload
        self.parked = park

    def collect(self, stream: Any = None) -> bytes | None:
        """Another rank, pipelined: the message rank 0 posted last iteration (None at the first
        iteration), then queues the header of the one it posts now. Parked (the last message
        said rank 0 went idle), it first waits on the doorbell, then for rank 0's header."""
        assert self.rank != 0
        if self.parked and self.bell is not None:
            self.bell.wait()
            self._queued = self._sum(self._zeros, stream)
            self.parked = False
        data = None
        if self._queued is not None:
            head = np.asarray(self._queued)
            word = int.from_bytes(head[:4].tobytes(), "little")
            length = word & ~_PARK
            data = head[4 : 4 + min(length, _INLINE)].tobytes()
            if length > _INLINE:
                rest = self._sum(mx.zeros(length - _INLINE, dtype=mx.uint8), stream)
                data += np.asarray(rest).tobytes()
            if word & _PARK:  # rank 0 went idle: no collective until it rings
                self._queued, self.parked = None, True
                return data
        self._queued = self._sum(self._zeros, stream)
        mx.async_eval(self._queued)
        return data

    def _header(self, payload: bytes, park: bool = False) -> mx.array:
        """A message's first collective: its length (and the park flag), and as much of it as
        fits."""
        if not payload and not park:
            return self._zeros
        head = np.zeros(HEADER_BYTES, dtype=np.uint8)
        word = len(payload) | (_PARK if park else 0)
        head[:4] = np.frombuffer(word.to_bytes(4, "little"), dtype=np.uint8)
        inline = payload[:_INLINE]
        head[4 : 4 + len(inline)] = np.frombuffer(inline, dtype=np.uint8)
        return mx.array(head)

    def wait(self) -> None:
        """Rank 0: waits until what it sent has gone (raises if the group failed)."""
        if self._pending:
            mx.eval(*self._pending)
            self._pending = []

    @property
    def _zeros(self) -> mx.array:
        if self._zeros_made is None:
            self._zeros_made = mx.zeros(HEADER_BYTES, dtype=mx.uint8)
        return self._zeros_made

    def _sum(self, data: mx.array, stream: Any) -> mx.array:
        return mx.distributed.all_sum(data, group=self.group, stream=stream)
