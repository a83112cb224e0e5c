"""The thread that owns one embedding model: requests queued while a forward runs are embedded
together in the next (one batch, bounded by rows and padded tokens per forward).

It shares the generation engine's thread lifecycle (model_thread.py: load on the thread, stop,
unload, the admission limit) and the process's memory budget: the weights are in the model's
account from load to unload, and a forward's activations while it runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mlx.utils import tree_flatten
from mlx_responses.service.engine.embedding.forward import activation_bytes, chunks, forward
from mlx_responses.service.engine.embedding.load import EmbeddingShape
from mlx_responses.service.engine.memory.budget import MemoryBudget, ModelAccount
from mlx_responses.service.engine.memory.kv_layout import KVLayout
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.model_thread import ModelThread, Stop
from mlx_responses.service.engine.requests import EngineStats

log = logging.getLogger(__name__)

NO_KV = KVLayout(layers=0, kv_heads=0, head_dim=0, dtype_bytes=4)


@dataclass
class EmbedJob:
    """One request's token rows and the future its vectors go to (on `loop`)."""

    rows: Sequence[Sequence[int]]
    future: asyncio.Future[np.ndarray]
    loop: asyncio.AbstractEventLoop


@dataclass
class EmbeddingWorker(ModelThread[tuple[LoadedModel, EmbeddingShape]]):
    """One embedding model's thread: loads it, then embeds queued requests in batches."""

    load: Callable[[], tuple[LoadedModel, EmbeddingShape]]
    name: str = "mlx-embedding"
    max_rows: int = 64  # rows of one forward
    max_tokens: int = 16_384  # padded tokens of one forward
    max_queued_requests: int = 64
    memory: MemoryBudget | None = None
    shape: EmbeddingShape | None = field(default=None, init=False)
    link: None = field(default=None, init=False)  # never in a distributed group

    def __post_init__(self) -> None:
        self._init_thread()
        self._account: ModelAccount | None = None
        self._release = False
        self.forwards = 0  # forwards run (tests and the benchmark read it)
        # What /metrics shows of the model (service/core.py): `running`, the requests of the
        # forward under way, `batch_size` its rows.
        self.stats = EngineStats()

    @property
    def _capacity(self) -> int:
        return self.max_queued_requests

    def _took(self, result: tuple[LoadedModel, EmbeddingShape]) -> LoadedModel:
        loaded, self.shape = result
        return loaded

    # --- called from asyncio -------------------------------------------------------------
    def submit(self, rows: Sequence[Sequence[int]]) -> asyncio.Future[np.ndarray]:
        """Queues `rows` (each a non-empty list of token ids); the future holds their vectors,
        `[len(rows), dimensions]` float32, unit length. QueueFullError, EngineStoppedError."""
        self._admit()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[np.ndarray] = loop.create_future()
        future.add_done_callback(lambda _: self._done())
        self._commands.put(EmbedJob(rows, future, loop))
        return future

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _released(self) -> None:
        if self._account is not None:
            self._account.close()
            self._account = None

    # --- the thread ------------------------------------------------------------------------
    def _run(self, ready: concurrent.futures.Future[tuple[LoadedModel, EmbeddingShape]]) -> None:
        try:
            loaded, shape = self.load()
            if self.memory is not None:
                leaves: Any = tree_flatten(loaded.model.parameters())
                weights = sum(int(array.nbytes) for _, array in leaves)
                self._account = self.memory.open(
                    loaded.alias, NO_KV, loaded.context_length, weights
                )
        except BaseException as exc:
            self._stopped.set()
            ready.set_exception(exc)
            return
        ready.set_result((loaded, shape))
        try:
            self._serve(loaded, shape)
        finally:
            self.alive = False
            for job in self._drain():
                _answer(job, error=RuntimeError("the embedding worker stopped"))
            if not self._release:
                self._park()
            self._stopped.set()

    def _drain(self) -> list[EmbedJob]:
        jobs: list[EmbedJob] = []
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return jobs
            if isinstance(command, EmbedJob):
                jobs.append(command)

    def _serve(self, loaded: LoadedModel, shape: EmbeddingShape) -> None:
        while True:
            jobs: list[EmbedJob] = []
            command = self._commands.get()
            while True:
                if isinstance(command, Stop):
                    self._release = command.release
                    for job in jobs:
                        _answer(job, error=RuntimeError("the embedding worker stopped"))
                    return
                if not command.future.done():  # a client gone before it ran: skipped
                    jobs.append(command)
                try:
                    command = self._commands.get_nowait()
                except queue.Empty:
                    break
            if jobs:
                self._embed(loaded, shape, jobs)

    def _embed(self, loaded: LoadedModel, shape: EmbeddingShape, jobs: list[EmbedJob]) -> None:
        """Every row of `jobs` in as few forwards as the bounds allow; each job answered."""
        rows = [row for job in jobs for row in job.rows]
        out = np.zeros((len(rows), shape.dimensions), dtype=np.float32)
        self.stats.running = self.stats.active = len(jobs)
        try:
            for chunk in chunks([len(r) for r in rows], self.max_rows, self.max_tokens):
                self.stats.batch_size = len(chunk)
                self.stats.max_batch_seen = max(self.stats.max_batch_seen, len(chunk))
                held = self._hold(loaded, len(chunk), max(len(rows[i]) for i in chunk))
                try:
                    out[chunk] = forward(
                        loaded.model, [rows[i] for i in chunk], shape.pad_id, shape.pooling
                    )
                finally:
                    self._free(held)
                self.forwards += 1
        except Exception as exc:  # a failed forward fails its batch, not the server
            log.exception("embedding forward failed; failing %d requests", len(jobs))
            for job in jobs:
                _answer(job, error=exc)
            return
        finally:
            self.stats.running = self.stats.active = self.stats.batch_size = 0
        self.stats.completed += len(jobs)
        start = 0
        for job in jobs:
            _answer(job, vectors=out[start : start + len(job.rows)])
            start += len(job.rows)

    def _hold(self, loaded: LoadedModel, rows: int, longest: int) -> int:
        """Puts a forward's activations in the model's account while it runs."""
        if self._account is None:
            return 0
        config = getattr(loaded.model, "config", None)
        hidden = int(getattr(config, "hidden_size", 0) or 0)
        heads = int(getattr(config, "num_attention_heads", 1) or 1)
        held = activation_bytes(rows, longest, hidden, heads)
        self._account.admit(0, 1)
        self._account.scheduler_bytes = held
        return held

    def _free(self, held: int) -> None:
        if self._account is not None and held:
            self._account.scheduler_bytes = 0
            self._account.release(0)


def _answer(
    job: EmbedJob, *, vectors: np.ndarray | None = None, error: BaseException | None = None
) -> None:
    def settle() -> None:
        if job.future.done():
            return
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(vectors)  # type: ignore[arg-type]

    with contextlib.suppress(RuntimeError):  # the loop closed (process shutdown)
        job.loop.call_soon_threadsafe(settle)
