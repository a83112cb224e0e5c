"""Property tests of the disk tier's two formats, read back: any index row and any damage to
an entry file is either served exactly as written or dropped (counted), never raised."""

from __future__ import annotations

import json
import math
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import mlx.core as mx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlx_responses.service.engine.mlx_lm_compat import KVCache
from mlx_responses.service.engine.prompt_cache.disk import BLOCK, PromptDisk
from mlx_responses.service.engine.prompt_cache.disk_check import BadEntry, entry_header, index_row

IDENTITY = "ab" * 32
TOKENS = list(range(BLOCK + 17))
HASH = st.text("0123456789abcdef", min_size=32, max_size=32)
ANY = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=40),
    st.binary(max_size=20),
)


def _cache() -> list[Any]:
    cache = KVCache()
    keys = mx.arange(2 * len(TOKENS) * 4, dtype=mx.float32).reshape(1, 2, len(TOKENS), 4)
    cache.update_and_fetch(keys, keys + 1)
    return [cache]


def _written(folder: Path) -> tuple[PromptDisk, Path, Any]:
    disk = PromptDisk(folder, 1 << 30, IDENTITY)
    assert disk.put("", TOKENS, _cache())
    disk.flush()
    (path,) = (folder / "entries").iterdir()
    with sqlite3.connect(folder / "index.sqlite") as db:
        row = db.execute("SELECT * FROM entries").fetchone()
    disk.close()
    return disk, path, row


@st.composite
def rows(draw: st.DrawFn) -> list[Any]:
    """Index rows: a valid one with some of its columns replaced by anything."""
    length = draw(st.integers(1, 4 * BLOCK))
    valid: list[Any] = [
        draw(HASH) + "-" + draw(HASH) + ".safetensors",
        IDENTITY[:32] + draw(HASH)[:16],
        length,
        draw(HASH),
        json.dumps(draw(st.lists(HASH, min_size=length // BLOCK, max_size=length // BLOCK))),
        draw(st.sampled_from([0, 1])),
        draw(st.integers(0, 1 << 40)),
        None,
        None,
    ]
    for column in draw(st.sets(st.integers(0, 8), max_size=3)):
        valid[column] = draw(ANY)
    return valid


@settings(max_examples=300, deadline=None)
@given(rows())
def test_an_index_row_is_valid_or_a_bad_entry(row: list[Any]) -> None:
    try:
        checked = index_row(row, BLOCK)
    except BadEntry:
        return
    assert "/" not in checked.name and checked.length >= 1
    assert len(checked.blocks) == checked.length // BLOCK


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rows(), min_size=1, max_size=4))
def test_a_tier_opens_over_any_index_and_keeps_its_good_entry(bad: list[list[Any]]) -> None:
    """Random rows beside a good entry: the tier opens, serves the good entry, drops (and
    counts) each row of its identity that fails the check."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _, _, good = _written(folder)
        with sqlite3.connect(folder / "index.sqlite") as db:
            for row in bad:
                db.execute(
                    "INSERT OR IGNORE INTO entries (name, key, length, digest, blocks, trimmable,"
                    " bytes, ttl, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
        disk = PromptDisk(folder, 1 << 30, IDENTITY)
        try:
            hit = disk.lookup("", [*TOKENS, 1, 2, 3])
            assert hit is not None and hit.entry.name == good[0]
            assert disk.load(hit, [*TOKENS, 1, 2, 3]) is not None
            assert sum(disk.health.dropped.values()) <= len(bad)
        finally:
            disk.flush()
            disk.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_entry_file_is_dropped_never_raised(data: st.DataObject) -> None:
    """Truncated at any length, or any bytes overwritten: `load` gives None (the entry
    dropped, counted) or the cache as written."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _, path, _ = _written(folder)
        raw = bytearray(path.read_bytes())
        if data.draw(st.booleans(), label="truncate"):
            raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="length")]
        else:
            at = data.draw(st.integers(0, len(raw) - 1), label="at")
            patch = data.draw(st.binary(min_size=1, max_size=16), label="patch")
            raw[at : at + len(patch)] = patch
        path.write_bytes(bytes(raw))
        disk = PromptDisk(folder, 1 << 30, IDENTITY)
        try:
            hit = disk.lookup("", [*TOKENS, 1])
            if hit is None:
                return
            loaded = disk.load(hit, [*TOKENS, 1])
            if loaded is None:
                assert disk.health.dropped == {"file": 1}
                return
            (cache,), rest = loaded
            assert rest == [1] and mx.array_equal(cache.state[0], _cache()[0].state[0]).item()
        finally:
            disk.flush()
            disk.close()


SPEC = st.fixed_dictionaries(
    {},
    optional={
        "dtype": st.one_of(ANY, st.sampled_from(["I32", "F32"])),
        "shape": st.one_of(ANY, st.lists(st.integers(-2, 20), max_size=3)),
        "data_offsets": st.one_of(ANY, st.lists(st.integers(-2, 80), max_size=3)),
    },
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["tokens", "0.keys", "__metadata__"]), st.one_of(ANY, SPEC)))
def test_any_parsed_header_is_checked_or_a_bad_entry(header: Any) -> None:
    """A header's tensors either lie inside the data, sized as their shapes say, or the
    header is a BadEntry."""
    try:
        _, tensors = entry_header(header, 64, {"I32": 4, "F32": 4})
    except BadEntry:
        return
    for dtype, shape, start in tensors.values():
        assert start >= 0 and start + 4 * math.prod(shape) <= 64 and dtype in ("I32", "F32")
