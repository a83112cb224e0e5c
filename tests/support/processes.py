"""The console script as a subprocess: free ports, start/stop, wait for /health."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Process:
    """One `mlx-responses` process; its output goes to a file (a pipe could fill and block it)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (lives as long as the process)
            prefix="mlx-responses-", suffix=".log", delete=False
        )
        self.proc = subprocess.Popen(
            [str(BIN / "mlx-responses"), *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


@contextmanager
def process(*args: str, env: dict[str, str] | None = None) -> Iterator[Process]:
    started = Process(*args, env=env)
    try:
        yield started
    finally:
        started.stop()


def wait_status(port: int, status: int, proc: Process | None = None, timeout: float = 90) -> None:
    """Waits until GET /health answers `status` (the process must stay alive meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise AssertionError(f"process exited early:\n{proc.output()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == status:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    output = proc.output() if proc is not None else ""
    raise AssertionError(f"/health never answered {status}:\n{output[-4000:]}")


def wait_serving(port: int, timeout: float = 90) -> None:
    """Waits until the gRPC core on `port` reports SERVING on the standard health service."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.2)
    raise AssertionError(f"core on {port} never SERVING")
