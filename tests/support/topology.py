"""Two cores sharing one Redis, and façades in front of them, on one event loop thread.

Each core is its own Core (engine thread, gRPC server on port 0) over its own Redis client, so
everything they share goes through Redis; the façades reach them over real loopback gRPC.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from mlx_responses.http_facade.app import start_facade
from mlx_responses.http_facade.config import FacadeSettings
from mlx_responses.http_facade.kit.core_pool import CorePool
from mlx_responses.http_facade.kit.requests import CORES
from mlx_responses.service.config import Settings
from mlx_responses.service.core import Core
from mlx_responses.service.server import CoreServer, start_core_server

T = TypeVar("T")


class Topology:
    """Cores `a` and `b` (and any more `names`); façades `a` (core a only), `b` (core b only),
    `pool` (every core)."""

    def __init__(
        self,
        model_path: Path,
        store_url: str,
        *,
        names: tuple[str, ...] = ("a", "b"),
        **overrides: Any,
    ) -> None:
        self.names = names  # the cores; façade `pool` has them all
        values: dict[str, Any] = {"keep_alive": -1.0, **overrides}  # tests read default.runtime
        self.settings = Settings(models=(model_path,), grpc_port=0, store_url=store_url, **values)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.cores: dict[str, Core] = {}
        self.servers: dict[str, CoreServer] = {}
        self.runners: dict[str, web.AppRunner] = {}
        self.ports: dict[str, int] = {}

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        """Runs a coroutine on the topology's loop and waits for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _start(self) -> None:
        for name in self.names:
            core = Core.from_settings(self.settings)
            self.cores[name] = core
            self.servers[name] = await start_core_server(core, "127.0.0.1", 0)
        await asyncio.gather(*(core.load() for core in self.cores.values()))
        for server in self.servers.values():
            await server.set_serving()
        address = {n: f"127.0.0.1:{s.port}" for n, s in self.servers.items()}
        fronts = {"a": [address["a"]], "b": [address["b"]], "pool": list(address.values())}
        for name, cores in fronts.items():
            runner, port = await start_facade(cores, FacadeSettings(host="127.0.0.1", port=0))
            self.runners[name], self.ports[name] = runner, port

    async def _stop(self) -> None:
        for runner in self.runners.values():
            await runner.cleanup()
        for server in self.servers.values():
            await server.shutdown(1)

    def start(self) -> None:
        self._thread.start()
        self.run(self._start())

    def stop(self) -> None:
        self.run(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def url(self, facade: str) -> str:
        return f"http://127.0.0.1:{self.ports[facade]}"

    def pool(self) -> CorePool:
        """The core pool of the `pool` façade."""
        return self.runners["pool"].app[CORES]

    def generated(self, core: str) -> int:
        """Tokens core `core`'s engine has generated so far."""
        return int(self.cores[core].models.default.runtime.worker.stats.generated_tokens)
