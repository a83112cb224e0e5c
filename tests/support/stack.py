"""A core and a façade on ephemeral ports, in their own event loop thread, for sync tests."""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from aiohttp import web
from mlx_responses.http_facade.app import start_facade
from mlx_responses.http_facade.config import FacadeSettings
from mlx_responses.service.config import Settings
from mlx_responses.service.core import Core
from mlx_responses.service.server import CoreServer, start_core_server
from mlx_responses.service.stores.select import open_stores, redis_stores

T = TypeVar("T")


def _outward(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _where(frames: list[FrameType]) -> None:
    """Frames as file:line function, innermost last (lines of running frames may be unknown)."""
    for f in frames:
        print(f"  {f.f_code.co_filename}:{f.f_lineno} {f.f_code.co_name}", file=sys.stderr)


class Stack:
    """Core (gRPC, port 0) + façade (HTTP, port 0) talking over a real loopback channel."""

    def __init__(self, model_path: Path, **overrides: Any) -> None:
        # `models=(a, b, ...)` serves several (model_path is then unused). Models stay loaded
        # (keep_alive -1) unless a test gives another: tests read `models.default.runtime`.
        values: dict[str, Any] = {
            "models": (model_path,),
            "grpc_port": 0,
            "keep_alive": -1.0,
            **overrides,
        }
        self.settings = Settings(**values)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.core: Core | None = None
        self.server: CoreServer | None = None
        self.runner: web.AppRunner | None = None
        self.http_port = 0

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        """Runs a coroutine on the stack's loop and waits for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _start(self) -> None:
        # A Redis-backed stack gets its own namespace: stacks with other limits stay apart.
        stores = (
            redis_stores(self.settings, namespace=f"stack-{uuid.uuid4().hex[:8]}")
            if self.settings.store_url != "memory"
            else open_stores(self.settings)
        )
        self.core = core = Core.with_stores(self.settings, stores)
        self.server = await start_core_server(core, "127.0.0.1", 0)
        self.runner, self.http_port = await start_facade(
            f"127.0.0.1:{self.server.port}",
            FacadeSettings(host="127.0.0.1", port=0),
            core.metrics.render,
        )
        await self.core.load()
        await self.server.set_serving()

    async def _stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.server is not None:
            await self.server.shutdown(1)

    def start(self) -> None:
        self._thread.start()
        self.run(self._start())

    def stop(self) -> None:
        try:
            self.run(self._stop())
        except TimeoutError:
            self._dump()
            raise
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _dump(self) -> None:
        """Where a stop hangs: every task on the stack's loop, then every thread."""
        print(f"stack stop timed out ({self.settings.store_url}); its tasks:", file=sys.stderr)
        try:
            tasks = list(asyncio.all_tasks(self._loop))
        except RuntimeError as exc:  # the loop changed its tasks while they were read
            tasks = []
            print(f"(tasks unreadable: {exc})", file=sys.stderr)
        for task in tasks:
            print(f"task {task.get_name()}:", file=sys.stderr)
            _where(task.get_stack())
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            print(f"thread {names.get(ident, ident)}:", file=sys.stderr)
            _where(list(_outward(frame))[::-1])

    @classmethod
    @contextmanager
    def running(cls, model_path: Path, **overrides: Any) -> Iterator[Stack]:
        stack = cls(model_path, **overrides)
        stack.start()
        try:
            yield stack
        finally:
            stack.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_address(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.port}"

    @property
    def engine_stats(self) -> Any:
        assert self.core is not None
        return self.core.models.default.runtime.worker.stats
