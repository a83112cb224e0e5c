"""A distributed group of `mlx-responses serve` processes on this machine (ring over 127.0.0.1).

`launched`: under mlx.launch itself (the documented way: `mlx.launch -n N --backend ring`);
`by_hand`: each rank started here with the variables mlx.launch sets (MLX_RANK, MLX_HOSTFILE),
so that a test can kill one rank and watch the others (mlx.launch stops a group whose rank
exits); `command="core"` starts a group of gRPC cores (no HTTP), for façades of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.processes import free_port, wait_status

BIN = Path(sys.executable).parent


@dataclass
class Group:
    """A running group: rank 0's HTTP and gRPC ports, and the processes (`ranks`: one per rank
    when started by hand; the launcher alone under mlx.launch)."""

    port: int
    grpc_port: int
    procs: list[subprocess.Popen[bytes]]
    logs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.logs
        )

    def health(self) -> int:
        """The core's gRPC health status (health_pb2.HealthCheckResponse values)."""
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            return int(reply.status)


def _serve_args(
    model: Path,
    mode: str,
    port: int,
    grpc_port: int,
    extra: Sequence[str],
    *,
    command: str = "serve",
) -> list[str]:
    http = ["--port", str(port)] if command == "serve" else []
    return [
        command,
        "--distributed",
        mode,
        "--model",
        str(model),
        *http,
        "--grpc-port",
        str(grpc_port),
        "--no-prompt-cache-disk",
        *extra,
    ]


def _log() -> Path:
    handle, name = tempfile.mkstemp(prefix="mlx-group-", suffix=".log")
    os.close(handle)
    return Path(name)


def _stop(procs: Sequence[subprocess.Popen[bytes]], logs: Sequence[Path]) -> None:
    """SIGTERM to rank 0 (or the launcher) first: it stops the others in order."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(20)
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for log in logs:
        log.unlink(missing_ok=True)


@contextlib.contextmanager
def by_hand(
    model: Path,
    mode: str,
    *extra: str,
    ranks: int = 2,
    rank_env: dict[int, dict[str, str]] | None = None,
    command: str = "serve",
) -> Iterator[Group]:
    """Each rank started here as mlx.launch would (ring on 127.0.0.1); rank 0 first in `procs`.
    `rank_env`: more variables for some ranks; `command`: serve, or core (gRPC only: the
    group's `port` is then unused)."""
    port, grpc_port = free_port(), free_port()
    hosts = [[f"127.0.0.1:{free_port()}"] for _ in range(ranks)]
    hostfile = _log()
    hostfile.write_text(json.dumps(hosts))
    logs = [_log() for _ in range(ranks)]
    procs = []
    for rank in range(ranks):
        env = {**os.environ, "MLX_RANK": str(rank), "MLX_HOSTFILE": str(hostfile)}
        env["PYTHONUNBUFFERED"] = "1"
        env |= (rank_env or {}).get(rank, {})
        with logs[rank].open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        str(BIN / "mlx-responses"),
                        *_serve_args(model, mode, port, grpc_port, extra, command=command),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
    group = Group(port, grpc_port, procs, logs)
    try:
        _wait_ready(group, http=command == "serve")
        yield group
    finally:
        _stop(procs, [*logs, hostfile])


def _free_run(n: int, taken: set[int]) -> int:
    """A port P with P .. P+n-1 all free now and none in `taken`: mlx.launch's ring ranks
    listen on P + rank, and a lone free P let rank 1 meet a port in use (`[ring] Couldn't bind
    socket (error: 98)`, seen on a clean-clone CI run)."""
    for _ in range(100):
        base = free_port()
        run = range(base, base + n)
        if taken.isdisjoint(run) and all(_bindable(p) for p in run[1:]):
            return base
    raise RuntimeError(f"no {n} consecutive free ports")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def launched(model: Path, mode: str, *extra: str, ranks: int = 2) -> Iterator[Group]:
    """`mlx.launch -n RANKS --backend ring --python PYTHON mlx-responses serve ...`."""
    port, grpc_port = free_port(), free_port()
    log = _log()
    command = [
        str(BIN / "mlx.launch"),
        "-n",
        str(ranks),
        "--backend",
        "ring",
        "--starting-port",
        str(_free_run(ranks, {port, grpc_port})),
        "--python",
        sys.executable,
        str(BIN / "mlx-responses"),
        *_serve_args(model, mode, port, grpc_port, extra),
    ]
    with log.open("wb") as out:
        launcher = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    group = Group(port, grpc_port, [launcher], [log])
    try:
        _wait_ready(group)
        # The launcher relays its stdin to each rank from a thread that polls without blocking
        # until a write to the rank fails (the ranks closed their stdin): one byte, on a stdin
        # left open (at its end, the launcher's main thread would poll it), stops the polling.
        assert launcher.stdin is not None
        launcher.stdin.write(b"\n")
        launcher.stdin.flush()
        yield group
    finally:
        if launcher.stdin is not None:
            with contextlib.suppress(OSError):
                launcher.stdin.close()
        # The launcher does not pass a SIGTERM on: rank 0 gets it, and stops the others.
        ranks_up = _children(launcher.pid)
        for pid in ranks_up[:1]:
            os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            launcher.wait(30)
        _stop([launcher], [log])
        for pid in ranks_up:  # a rank the group left behind (it never heard the stop)
            with contextlib.suppress(OSError):
                if b"mlx-responses" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    """The processes `pid` started, in order (the launcher's: its ranks)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return sorted(found)


def _wait_ready(group: Group, *, http: bool = True) -> None:
    """Until rank 0's HTTP (`http`) and its gRPC health serve (every rank staying up)."""

    class _Alive:
        def alive(self) -> bool:
            return all(p.poll() is None for p in group.procs)

        def output(self) -> str:
            return group.output()

    if http:
        wait_status(group.port, 200, _Alive(), timeout=120)  # type: ignore[arg-type]
    deadline = time.monotonic() + (30 if http else 120)
    while not _serving(group):
        assert _Alive().alive(), f"a rank exited early:\n{group.output()}"
        assert time.monotonic() < deadline, group.output()
        time.sleep(0.2)


def _serving(group: Group) -> bool:
    try:
        return group.health() == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:  # not listening yet
        return False
