"""Prompt-cache entries written under a client's lifetime expire, in memory and on disk.

An engine runs on an injected clock: an entry is served while it is younger than its ttl since
its last use (each use moves that on), never after, and an entry written without one stays. The
disk cases restart the engine over one folder (a fresh engine's memory is empty: what it reads
comes from disk), the clock moving on between them.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.prompt_cache.disk import BLOCK, PromptDisk
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.text.retention import Retention

from tests.support.random_model import build_random_model

TEXT = "The keeper of the lighthouse writes the tides in his logbook every night. " * 30
TTL = 300.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def windowed(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """Every layer slides over 16 tokens: its entries cannot be trimmed back."""
    return build_random_model(
        tmp_path_factory.mktemp("lifetimes-window") / "windowed",
        seed=5,
        tokenizer_from=model_path,
        sliding_window=16,
    )


def _prompt(path: Path) -> list[int]:
    prompt: list[int] = load_model(path).tokenizer.encode(TEXT)
    assert len(prompt) > 2 * BLOCK
    return prompt


async def _read(engine: EngineWorker, prompt: list[int], retention: Any = None) -> int:
    """Serves `prompt` (a few greedy tokens): the prompt tokens it read from the cache."""
    cached = -1
    stream = engine.submit(
        prompt, SamplingParams(max_tokens=2, temperature=0.0), (), (), retention=retention
    )
    async for chunks in stream.batches():
        for chunk in chunks:
            assert chunk.finish_reason in (None, "stop", "length"), chunk.error
            cached = chunk.cached_tokens if cached < 0 else cached
    return cached


def _engine(path: Path, clock: Clock, folder: Path | None = None) -> EngineWorker:
    return EngineWorker(
        lambda: load_model(path),
        prompt_cache_dir=folder,
        prompt_cache_disk_bytes=1 << 30 if folder is not None else 0,
        clock=clock,
    )


@pytest.mark.parametrize("kind", ["plain", "windowed"])
async def test_a_memory_entry_expires_after_its_ttl_unless_used(
    kind: str, random_model: Path, windowed: Path
) -> None:
    path = random_model if kind == "plain" else windowed
    prompt = _prompt(path)
    bounded = Retention.of(TTL, [], merged=kind == "plain")
    clock = Clock()
    engine = _engine(path, clock)
    await engine.start()
    try:
        assert await _read(engine, prompt, bounded) == 0
        clock.now += TTL - 1
        assert await _read(engine, prompt, bounded) > 0  # within its ttl: served, refreshed
        clock.now += TTL - 1  # past the ttl since the write, within it since the use
        assert await _read(engine, prompt, bounded) > 0
        clock.now += TTL
        assert await _read(engine, prompt) == 0  # unused for its ttl: never served
        # Written without a lifetime (that last turn): the LRU's, however long.
        clock.now += 10**6
        assert await _read(engine, prompt) > 0
    finally:
        engine.stop()


@pytest.mark.parametrize("kind", ["plain", "windowed"])
async def test_a_disk_entry_expires_after_its_ttl_unless_used(
    kind: str, random_model: Path, windowed: Path, tmp_path: Path
) -> None:
    """Each read on a fresh engine (a restart) comes from disk; a read there refreshes the
    entry's expiry in the index, so the next restart sees it."""
    path = random_model if kind == "plain" else windowed
    prompt = _prompt(path)
    clock = Clock()

    async def restarted(retention: Any = None) -> int:
        engine = _engine(path, clock, tmp_path)
        await engine.start()
        try:
            read = await _read(engine, prompt, retention)
            assert engine.kv.prompt is not None and engine.kv.prompt.disk is not None
            engine.kv.prompt.disk.flush()
            return read
        finally:
            engine.stop()

    bounded = Retention.of(TTL, [], merged=kind == "plain")
    assert await restarted(bounded) == 0
    clock.now += TTL - 1
    assert await restarted(bounded) > 0  # from disk, within its ttl; rewritten, refreshed
    clock.now += TTL - 1
    assert await restarted(bounded) > 0
    clock.now += TTL
    assert await restarted() == 0  # expired: deleted, never served
    entries = list((tmp_path / "entries").iterdir())
    assert len(entries) >= 1  # the last turn's own (no lifetime) ...
    clock.now += 10**6
    assert await restarted() > 0  # ... stays


async def test_in_memory_retention_never_reaches_the_disk(
    random_model: Path, tmp_path: Path
) -> None:
    prompt = _prompt(random_model)
    clock = Clock()
    memory_only = Retention.of(3600, [], merged=True, memory_only=True)
    for expected in (0, 0):  # the second, a restart, finds nothing on disk
        engine = _engine(random_model, clock, tmp_path)
        await engine.start()
        try:
            assert await _read(engine, prompt, memory_only) == expected
            assert await _read(engine, prompt, memory_only) > 0  # memory serves it
            assert engine.kv.prompt is not None and engine.kv.prompt.disk is not None
            engine.kv.prompt.disk.flush()
        finally:
            engine.stop()
    assert not list((tmp_path / "entries").iterdir())


NAME = f"{'0' * 48}-{'d' * 32}.safetensors"  # a valid entry's name (prompt_cache/disk_check.py)


def test_an_index_written_before_lifetimes_gains_them(tmp_path: Path) -> None:
    """A prompt-cache folder from before lifetimes (its index without `ttl` and `expires`):
    opening it adds the columns, and its entries stay, without an expiry."""
    (tmp_path / "entries").mkdir()
    identity = "f" * 64
    with closing(sqlite3.connect(tmp_path / "index.sqlite")) as db:
        db.execute(
            "CREATE TABLE entries (name TEXT PRIMARY KEY, key TEXT, length INTEGER,"
            " digest TEXT, blocks TEXT, trimmable INTEGER, bytes INTEGER, last_use REAL)"
        )
        db.execute(
            "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (NAME, identity[:32] + "0" * 16, 300, "d" * 32, json.dumps(["e" * 32]), 1, 10, 0.0),
        )
        db.commit()
    disk = PromptDisk(tmp_path, 1 << 30, identity, Clock())
    try:
        (entry,) = disk._entries.values()
        assert entry.name == NAME and entry.ttl is None and entry.expires is None
    finally:
        disk.close()
    with closing(sqlite3.connect(tmp_path / "index.sqlite")) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(entries)")}
    assert {"ttl", "expires"} <= columns
