"""A real redis-server on a free port in a temporary folder, for the tests (restartable)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from tests.support.processes import free_port


class RedisServer:
    """`redis-server` bound to 127.0.0.1 with an append-only file, so a restart keeps the data."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.folder), "--save", "", "--appendonly", "yes"]
        args += ["--daemonize", "no", "--logfile", str(self.folder / "redis.log")]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                log = (self.folder / "redis.log").read_text(errors="replace")
                raise RuntimeError(f"redis-server exited at start:\n{log}")
            if self.ping():
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM: redis-server flushes its append-only file and exits."""
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
