"""The asyncio side of one request: the chunks an engine thread hands back, read as they come."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Protocol

from mlx_responses.service.engine.requests import Chunk


class Cancels(Protocol):
    """The engine a stream belongs to: it drops the stream's sequence on request."""

    def cancel(self, stream: GenerationStream) -> None: ...


class GenerationStream:
    """The asyncio side of one request: an async iterator of coalesced chunks."""

    def __init__(self, worker: Cancels, loop: asyncio.AbstractEventLoop) -> None:
        self._worker = worker
        self._loop = loop
        self._queue: asyncio.Queue[Chunk] = asyncio.Queue()
        self.finished = False
        self.first_token_at: float | None = None

    def deliver(self, chunk: Chunk) -> None:
        """Called on the loop thread (through call_soon_threadsafe)."""
        if self.first_token_at is None and chunk.tokens:
            self.first_token_at = time.perf_counter()
        self._queue.put_nowait(chunk)

    def cancel(self) -> None:
        """Stops the generation (idempotent); a final 'cancelled' chunk follows."""
        if not self.finished:
            self._worker.cancel(self)

    async def batches(self) -> AsyncIterator[list[Chunk]]:
        """Yields every chunk that is ready, together, until the last one."""
        try:
            while not self.finished:
                ready = await self._queue.get()
                # What arrived since the last read leaves as one chunk (one event downstream).
                while not self._queue.empty():
                    ready = ready.merged(self._queue.get_nowait())
                if ready.finish_reason is not None:
                    self.finished = True
                yield [ready]
        finally:
            # A consumer that stops early (client gone, task cancelled) frees its slot.
            if not self.finished:
                self.finished = True
                self._worker.cancel(self)
