"""An idle group's other ranks park on rank 0's doorbell (a socket) instead of in a collective
(MLX's ring backend spins a core while one waits): the doorbell's connections and rings, and
the channel's park protocol, with the collectives played in process (the k-th collective of
rank 0 meets the k-th of the other rank) and a real doorbell."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mlx_responses.service.engine.distributed import doorbell
from mlx_responses.service.engine.distributed.channel import Channel, ChannelError
from mlx_responses.service.engine.distributed.doorbell import Doorbell

from tests.support.waits import until

TOKEN = "secret"


def _pair(timeout: float = 5.0) -> tuple[Doorbell, Doorbell]:
    """Rank 0's doorbell and another rank's, connected over 127.0.0.1."""
    server = doorbell.listen("127.0.0.1")
    port = server.getsockname()[1]
    got: list[Doorbell] = []
    accepting = threading.Thread(target=lambda: got.append(Doorbell.accept(server, 1, TOKEN, 5)))
    accepting.start()
    other = Doorbell.connect("127.0.0.1", port, TOKEN, timeout)
    accepting.join(5)
    return got[0], other


def test_a_ring_wakes_the_other_rank_and_a_closed_doorbell_fails_it() -> None:
    leader, other = _pair()
    woke = threading.Event()

    def wait() -> None:
        other.wait()
        woke.set()

    waiting = threading.Thread(target=wait)
    waiting.start()
    assert not woke.wait(0.2)  # no ring, no wake
    leader.ring()
    assert woke.wait(5)
    leader.close()  # rank 0 gone: the parked rank hears it at once
    with pytest.raises(ChannelError, match="closed its doorbell"):
        other.wait()
    other.close()


def test_a_silent_rank_0_fails_the_wait_after_the_timeout() -> None:
    leader, other = _pair(timeout=0.2)
    with pytest.raises(ChannelError, match="did not ring"):
        other.wait()
    leader.close()
    other.close()


def test_a_stranger_is_turned_away() -> None:
    server = doorbell.listen("127.0.0.1")
    port = server.getsockname()[1]
    got: list[Doorbell] = []
    accepting = threading.Thread(target=lambda: got.append(Doorbell.accept(server, 1, TOKEN, 5)))
    accepting.start()
    with socket.create_connection(("127.0.0.1", port)) as stranger:
        stranger.sendall(b"guess\n")
        assert stranger.recv(1) == b""  # closed on it
    ours = Doorbell.connect("127.0.0.1", port, TOKEN, 5)
    accepting.join(5)
    assert len(got) == 1
    got[0].ring()
    ours.wait()
    got[0].close()
    ours.close()


def test_rank_0s_address_comes_from_what_mlx_launch_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLX_JACCL_COORDINATOR", raising=False)
    monkeypatch.delenv("MLX_HOSTFILE", raising=False)
    assert doorbell.rank0_host() is None  # mpi, or no group: no doorbell
    hostfile = tmp_path / "hosts.json"
    hostfile.write_text(json.dumps([["10.0.0.11:5000", "10.0.1.11:5001"], ["10.0.0.12:5002"]]))
    monkeypatch.setenv("MLX_HOSTFILE", str(hostfile))
    assert doorbell.rank0_host() == "10.0.0.11"
    monkeypatch.setenv("MLX_JACCL_COORDINATOR", "192.168.10.1:32323")
    assert doorbell.rank0_host() == "192.168.10.1"


class _Group:
    def __init__(self, rank: int) -> None:
        self._rank = rank

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return 2


class Wire:
    """Collectives played in process: the k-th of the other rank returns rank 0's k-th (and
    blocks until rank 0 has queued it, as a collective waits for its peer)."""

    def __init__(self) -> None:
        self.sent: list[np.ndarray] = []
        self.taken = 0  # the collectives the other rank has queued
        self.changed = threading.Condition()


class PlayedChannel(Channel):
    def __init__(self, rank: int, wire: Wire) -> None:
        super().__init__(_Group(rank))
        self.wire = wire

    def _sum(self, data: mx.array, stream: Any) -> mx.array:
        with self.wire.changed:
            if self.rank == 0:
                self.wire.sent.append(np.array(data))
                self.wire.changed.notify_all()
                return data
            k = self.wire.taken
            self.wire.taken += 1
            self.wire.changed.notify_all()
            assert self.wire.changed.wait_for(lambda: len(self.wire.sent) > k, 10)
            return mx.array(self.wire.sent[k])


def test_a_parked_rank_queues_no_collective_until_rank_0_rings() -> None:
    """Rank 0 posts "a", then an empty message that parks the other rank: it reads both and
    queues no next collective (where the ring backend would spin) until rank 0 rings before its
    next message, a long one (its rest follows in the next post), which it then reads."""
    wire = Wire()
    leader, other = PlayedChannel(0, wire), PlayedChannel(1, wire)
    leader.bell, other.bell = _pair()
    got: list[bytes | None] = []

    def follow() -> None:
        while not got or got[-1] != b"end":
            got.append(other.collect())

    following = threading.Thread(target=follow, daemon=True)
    following.start()
    leader.post(b"a")
    leader.post(b"", park=True)
    until(lambda: len(got) >= 3, "the follower collected three posts")
    assert got == [None, b"a", b""]
    assert other.parked and leader.parked
    time.sleep(0.2)
    assert wire.taken == 2  # parked: no collective queued after the park message's
    long = b"L" * 600  # longer than a header holds: its rest goes with the next post
    leader.post(long)  # rings first
    assert not leader.parked
    leader.post(b"end")
    leader.post(b"", park=True)  # what the other rank queued after "end" meets
    following.join(10)
    assert got == [None, b"a", b"", long, b"end"]
    assert not other.parked
