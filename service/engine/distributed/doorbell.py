"""Rank 0's doorbell: one TCP connection to each other rank, on which an idle group's other
ranks wait instead of in a collective.

MLX's `ring` backend polls its sockets without blocking while a collective waits, so a rank
parked in one spins a core for as long as rank 0 has nothing to send; a rank waiting in `recv`
on a socket costs nothing. Rank 0 tells the others it goes idle (channel.py's park flag), they
wait on their doorbell, and rank 0 rings it (one byte each) before its next message.

Rank 0's address comes from what mlx.launch gives every rank: the ring backend's hostfile
(`MLX_HOSTFILE`: each rank's "ip:port" list, rank 0's first) or jaccl's coordinator
(`MLX_JACCL_COORDINATOR`, rank 0's "ip:port"). Where neither is set (mpi) there is no doorbell
and the other ranks wait in the collective as before. A connection proves itself with a token
rank 0 sent over the group (a stranger connecting to the port is turned away).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import socket
import time
from pathlib import Path

from mlx_responses.service.engine.distributed.channel import ChannelError

# The longest a rank tries to reach rank 0's doorbell at startup (then it serves without one).
CONNECT_TIMEOUT = 10.0


def rank0_host() -> str | None:
    """Rank 0's IP as mlx.launch told every rank (None where it did not)."""
    coordinator = os.environ.get("MLX_JACCL_COORDINATOR")
    if coordinator:
        return coordinator.rsplit(":", 1)[0]
    hostfile = os.environ.get("MLX_HOSTFILE")
    if not hostfile:
        return None
    try:
        hosts = json.loads(Path(hostfile).read_text())
        return str(hosts[0][0]).rsplit(":", 1)[0]
    except (OSError, ValueError, LookupError, TypeError):
        return None


def listen(host: str) -> socket.socket:
    """Rank 0: a listening socket on `host`, on a port of the system's choosing."""
    server = socket.create_server((host, 0), backlog=64)
    return server


class Doorbell:
    """Rank 0 rings (`ring`); another rank waits for a ring (`wait`)."""

    def __init__(self, sockets: list[socket.socket], timeout: float | None) -> None:
        self._sockets = sockets
        # The longest a ring may take to come: rank 0 rings at least every heartbeat.
        self._timeout = timeout

    @classmethod
    def accept(cls, server: socket.socket, count: int, token: str, timeout: float) -> Doorbell:
        """Rank 0: the connections of the `count` other ranks (each sends `token` first),
        within `timeout` seconds (OSError otherwise)."""
        deadline = time.monotonic() + timeout
        sockets: list[socket.socket] = []
        try:
            while len(sockets) < count:
                server.settimeout(max(deadline - time.monotonic(), 0.001))
                conn, _ = server.accept()
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
                try:
                    said = _read_line(conn)
                except OSError:
                    conn.close()
                    continue
                if not hmac.compare_digest(said, token):
                    conn.close()  # not one of ours
                    continue
                conn.settimeout(None)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sockets.append(conn)
        except BaseException:
            for conn in sockets:
                conn.close()
            raise
        finally:
            server.close()
        return cls(sockets, None)

    @classmethod
    def connect(cls, host: str, port: int, token: str, timeout: float) -> Doorbell:
        """Another rank: its connection to rank 0's doorbell (OSError when it fails, or takes
        over 10 s); a wait fails after `timeout` without a ring."""
        conn = socket.create_connection((host, port), timeout=min(timeout, CONNECT_TIMEOUT))
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(token.encode() + b"\n")
        return cls([conn], timeout)

    def ring(self) -> None:
        """Rank 0: wakes every other rank (ChannelError when one is gone)."""
        try:
            for conn in self._sockets:
                conn.sendall(b"!")
        except OSError as exc:
            raise ChannelError(f"a rank's doorbell failed: {exc}") from exc

    def wait(self) -> None:
        """Another rank: blocks until rank 0 rings (ChannelError when rank 0 is gone, or rang
        for none of the timeout)."""
        (conn,) = self._sockets
        conn.settimeout(self._timeout)
        try:
            rung = conn.recv(1)
        except TimeoutError as exc:
            raise ChannelError(f"rank 0 did not ring in {self._timeout:g}s") from exc
        except OSError as exc:
            raise ChannelError(f"rank 0's doorbell failed: {exc}") from exc
        if not rung:
            raise ChannelError("rank 0 closed its doorbell (it stopped)")

    def close(self) -> None:
        for conn in self._sockets:
            with contextlib.suppress(OSError):
                conn.close()


def _read_line(conn: socket.socket, limit: int = 256) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk or len(data) > limit:
            raise OSError("no token")
        data += chunk
    return data[:-1].decode(errors="replace")
