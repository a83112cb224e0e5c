"""The prompt cache's disk tier: a restart serves a long prefix from disk, and changes nothing.

Each test runs a prompt on one worker (its entries written to a folder), stops it, and runs it
again on a fresh worker over the same folder: a restart. The fresh worker's memory cache is
empty, so what it reads comes from disk.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.prompt_cache.disk import BLOCK, MAX_PENDING, PromptDisk
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.random_model import build_random_model

TOKENS = 12
# A prompt of a few blocks (entries under one block are not written).
TEXT = "The quick brown fox jumps over the lazy dog, and the lazy dog sleeps on. " * 40


@pytest.fixture(scope="module")
def windowed(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """Every layer slides over 16 tokens: its entries cannot be trimmed back."""
    return build_random_model(
        tmp_path_factory.mktemp("disk-window") / "windowed",
        seed=5,
        tokenizer_from=model_path,
        sliding_window=16,
    )


@pytest.fixture(scope="module")
def head32(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """Its head dimension (32) quantizes (--kv-bits)."""
    return build_random_model(
        tmp_path_factory.mktemp("disk-kv") / "kv-chat",
        hidden_size=128,
        intermediate_size=256,
        seed=5,
        tokenizer_from=model_path,
    )


async def _run(
    path: Path, prompts: list[list[int]], folder: Path | None, **worker: Any
) -> tuple[list[tuple[tuple[int, ...], int]], PromptDisk | None]:
    """Each prompt served in turn on a fresh worker (its greedy ids and cached tokens); the
    worker's disk tier, its writes flushed."""
    out, engine = await _serve(path, prompts, folder, **worker)
    return out, engine.kv.prompt.disk


async def _serve(
    path: Path, prompts: list[list[int]], folder: Path | None, **worker: Any
) -> tuple[list[tuple[tuple[int, ...], int]], EngineWorker]:
    """`_run`, with the stopped worker (its prompt caches)."""
    engine = EngineWorker(
        lambda: load_model(path),
        prompt_cache_dir=folder,
        prompt_cache_disk_bytes=1 << 30,
        **worker,
    )
    await engine.start()
    out = []
    try:
        for prompt in prompts:
            sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
            ids: tuple[int, ...] = ()
            cached = -1
            async for chunks in engine.submit(prompt, sampling).batches():
                for chunk in chunks:
                    assert chunk.finish_reason in (None, "stop", "length"), chunk.error
                    cached = chunk.cached_tokens if cached < 0 else cached
                    ids += chunk.token_ids
            out.append((ids, cached))
        if engine.kv.prompt.disk is not None:
            engine.kv.prompt.disk.flush()
    finally:
        engine.stop()
    return out, engine


def _prompt(path: Path, text: str = TEXT) -> list[int]:
    prompt: list[int] = load_model(path).tokenizer.encode(text)
    assert len(prompt) > 2 * BLOCK
    return prompt


CASES = [
    ("short_context_model", {}),
    ("short_context_model", {"engine": "slots"}),
    ("short_context_model", {"solo": False}),
    ("windowed", {}),
    ("windowed", {"engine": "slots"}),
    ("head32", {"kv_bits": 8}),
    ("head32", {"kv_bits": 4, "engine": "slots"}),
]


@pytest.mark.parametrize(("model", "worker"), CASES)
async def test_a_restart_reads_the_prefix_from_disk_and_decodes_the_same(
    request: pytest.FixtureRequest, tmp_path: Path, model: str, worker: dict[str, Any]
) -> None:
    """Greedy tokens equal with the prefix cold, from memory and from disk; on plain,
    sliding-window and quantized-KV caches."""
    path = request.getfixturevalue(model)
    prompt = _prompt(path)
    longer = [*prompt, *load_model(path).tokenizer.encode(" And then? " + TEXT[:400])]
    (cold, memory), first = await _serve(path, [prompt, prompt], tmp_path, **worker)
    written = first.kv.prompt.disk
    assert written is not None and written.writes >= 1
    assert memory[0] == cold[0] and memory[1] >= len(prompt) - BLOCK  # served from memory
    # What the disk gives back for the prompt is what memory holds for it, bit for bit.
    assert first.kv.prompt is not None
    in_memory, rest = first.kv.prompt.memory.fetch_serving(first.kv.prompt.key(""), prompt)
    hit = written.lookup(first.kv.prompt.key(""), prompt)
    assert hit is not None
    from_disk = written.load(hit, prompt)
    assert from_disk is not None and from_disk[1] == rest
    _assert_same(from_disk[0], in_memory)
    assert written.lookup(first.kv.prompt.key("another key's owner"), prompt) is None
    (restored, extended), disk = await _run(path, [prompt, longer], tmp_path, **worker)
    assert disk is not None and disk.hits >= 1 and disk.errors == 0
    assert restored[0] == cold[0]
    assert restored[1] >= 0.9 * len(prompt)  # read from disk
    (longer_cold,), _ = await _run(path, [longer], None, **worker)
    assert extended[0] == longer_cold[0] and extended[1] >= 0.5 * len(longer)


async def test_an_entry_serves_only_its_own_kv_layout(head32: Path, tmp_path: Path) -> None:
    """Entries written with 8-bit KV are not read by the same model with plain KV, nor with
    4-bit (they are another identity's: not found, not an error)."""
    prompt = _prompt(head32)
    _, written = await _run(head32, [prompt], tmp_path, kv_bits=8)
    assert written is not None and written.writes >= 1
    for layout in ({}, {"kv_bits": 4}):
        ((_, cached),), disk = await _run(head32, [prompt], tmp_path, **layout)
        assert disk is not None and disk.hits == 0 and disk.errors == 0 and cached == 0
    ((_, cached),), disk = await _run(head32, [prompt], tmp_path, kv_bits=8)
    assert disk is not None and disk.hits == 1 and cached >= 0.9 * len(prompt)


def _assert_same(a: list[Any], b: list[Any]) -> None:
    """The same cache classes, every state leaf equal (arrays in dtype, shape and values)."""
    assert [type(c) for c in a] == [type(c) for c in b]
    for x, y in zip(a, b, strict=True):
        left, right = tree_flatten(x.state), tree_flatten(y.state)
        assert [p for p, _ in left] == [p for p, _ in right]
        for (_, u), (_, v) in zip(left, right, strict=True):
            if isinstance(u, mx.array):
                assert u.dtype == v.dtype and u.shape == v.shape
                assert mx.array_equal(u, v).item()
            else:
                assert u == v


def _damage(folder: Path, how: str, foreign: Path) -> None:
    (entry,) = sorted((folder / "entries").iterdir())
    data = bytearray(entry.read_bytes())
    if how == "corrupt":
        data[-100] ^= 0xFF  # a byte of the KV
        entry.write_bytes(bytes(data))
    elif how == "truncated":
        entry.write_bytes(bytes(data[: len(data) // 2]))
    elif how == "garbage":
        entry.write_bytes(b"\x00" * 64)
    else:  # another model's entry for the same tokens, under this one's name
        (other,) = (foreign / "entries").iterdir()
        shutil.copyfile(other, entry)


@pytest.mark.parametrize("how", ["corrupt", "truncated", "garbage", "foreign"])
async def test_a_damaged_or_foreign_file_is_skipped_and_deleted(
    random_model: Path, head32: Path, tmp_path: Path, how: str
) -> None:
    prompt = _prompt(random_model)
    (cold,), _ = await _run(random_model, [prompt], tmp_path / "mine")
    foreign = tmp_path / "theirs"
    await _run(head32, [prompt], foreign)  # same tokenizer, other weights
    _damage(tmp_path / "mine", how, foreign)
    (again,), disk = await _run(random_model, [prompt], tmp_path / "mine")
    assert disk is not None and disk.hits == 0 and disk.errors == 1
    assert again == (cold[0], 0)  # prefilled whole, the same tokens
    # Deleted: the entry there now is the one this run wrote.
    ((fresh, cached),), disk = await _run(random_model, [prompt], tmp_path / "mine")
    assert disk is not None and disk.errors == 0 and fresh == cold[0] and cached > 0


async def test_the_disk_budget_holds(random_model: Path, tmp_path: Path) -> None:
    """Distinct prompts fill the folder past its budget: the oldest entries go, the last stays."""
    tokenizer = load_model(random_model).tokenizer
    prompts = [tokenizer.encode(f"Request number {i}. " + TEXT) for i in range(5)]
    _, sized = await _run(random_model, prompts[:1], tmp_path / "probe")
    assert sized is not None
    one = max(p.stat().st_size for p in (tmp_path / "probe" / "entries").iterdir())
    budget = int(2.5 * one)
    engine = EngineWorker(
        lambda: load_model(random_model),
        prompt_cache_dir=tmp_path / "budget",
        prompt_cache_disk_bytes=budget,
    )
    loaded = await engine.start()
    try:
        for prompt in prompts:
            sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
            async for _ in engine.submit(prompt, sampling).batches():
                pass
            assert engine.kv.prompt.disk is not None
            # One write at a time: none dropped for a busy writer.
            engine.kv.prompt.disk.flush()
        disk = engine.kv.prompt.disk
        assert disk is not None and disk.writes == len(prompts)
    finally:
        engine.stop()
    files = list((tmp_path / "budget" / "entries").iterdir())
    assert sum(p.stat().st_size for p in files) <= budget
    assert len(files) == 2
    # The most recent prompt is still served from disk after a restart.
    del loaded
    ((_, cached),), disk = await _run(random_model, prompts[-1:], tmp_path / "budget")
    assert disk is not None and disk.hits == 1 and cached >= 0.9 * len(prompts[-1])


async def test_a_stalled_disk_never_stalls_the_engine(
    random_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes happen behind the requests: with the writer held, turns go on being served, and
    entries past the `MAX_PENDING` waiting are dropped rather than queued (memory stays
    bounded)."""
    held = threading.Event()
    original = PromptDisk._write

    def stalled(self: PromptDisk, db: Any, job: Any) -> None:
        held.wait(60)
        original(self, db, job)

    monkeypatch.setattr(PromptDisk, "_write", stalled)
    tokenizer = load_model(random_model).tokenizer
    prompts = [tokenizer.encode(f"Request number {i}. " + TEXT) for i in range(MAX_PENDING + 2)]
    engine = EngineWorker(
        lambda: load_model(random_model), prompt_cache_dir=tmp_path, prompt_cache_disk_bytes=1 << 30
    )
    await engine.start()
    try:
        for prompt in prompts:
            sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
            stream = engine.submit(prompt, sampling)
            await asyncio.wait_for(_drain(stream), 60)
        disk = engine.kv.prompt.disk
        assert disk is not None and disk.writes == 0  # nothing written yet, all served
        held.set()
        disk.flush()
        assert disk.writes == MAX_PENDING
    finally:
        held.set()
        engine.stop()


async def _drain(stream: Any) -> None:
    async for _ in stream.batches():
        pass


def test_every_dtype_a_cache_state_holds_round_trips(tmp_path: Path) -> None:
    """A state of token ids in int64 (longcat_flash_ngram's n-gram context) beside bf16 and
    int32 ones is written and read back exactly (an int64 leaf was never written: no restart
    served that model from disk)."""
    from mlx_responses.service.engine.mlx_lm_compat import ArraysCache, CacheList, KVCache

    tokens = list(range(BLOCK + 5))
    context = ArraysCache(size=1)
    context[0] = mx.array([[7, 8, 9]], dtype=mx.int64)
    kv = KVCache()
    keys = mx.arange(2 * len(tokens) * 4).reshape(1, 2, len(tokens), 4)
    kv.update_and_fetch(keys.astype(mx.bfloat16), keys.astype(mx.int32))
    cache = [context, CacheList(kv)]
    disk = PromptDisk(tmp_path, 1 << 30, "ab" * 32)
    try:
        assert disk.put("", tokens, cache)
        disk.flush()
        hit = disk.lookup("", [*tokens, 1])
        assert hit is not None
        loaded = disk.load(hit, [*tokens, 1])
        assert loaded is not None and loaded[1] == [1]
        _assert_same(cache, loaded[0])
    finally:
        disk.close()


def test_the_folder_never_holds_more_than_its_budget_not_even_mid_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Distinct entries past the budget: at every file written (the moment the new file takes
    its name, the old ones not yet deleted) the folder, its index included, holds at most the
    budget; the newest entry is kept. Before: the new file was written first and the oldest
    deleted after, and the index was not counted (the soak's 16 MiB bound read 17-19 MiB)."""
    from mlx_responses.service.engine.mlx_lm_compat import KVCache

    def entry(i: int) -> tuple[list[int], list[Any]]:
        tokens = [i, *range(1, BLOCK + 8)]
        kv = KVCache()
        keys = mx.full((1, 2, len(tokens), 16), float(i))
        kv.update_and_fetch(keys, keys)
        return tokens, [kv]

    folder = tmp_path / "bounded"
    seen: list[int] = []
    replace = os.replace

    def measured(src: Any, dst: Any) -> None:
        replace(src, dst)
        seen.append(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()))

    monkeypatch.setattr(os, "replace", measured)
    one = 2 * 2 * (BLOCK + 8) * 16 * 4  # an entry's arrays (its file: a little more)
    budget = int(3.5 * one)
    disk = PromptDisk(folder, budget, "cd" * 32)
    try:
        for i in range(6):
            assert disk.put("", *entry(i))
            disk.flush()
        assert disk.writes == 6 and len(seen) == 6
        assert max(seen) <= budget, (seen, budget)
        last = entry(5)[0]
        assert disk.lookup("", [*last, 1]) is not None
    finally:
        disk.close()
