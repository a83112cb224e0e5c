"""The disk tier's bad rows, bad entries and bad disks: each is dropped or degrades the tier
(logged, counted), the request is served all the same (a cold prefill gives the same greedy
tokens) and the rest of the tier keeps serving."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.prompt_cache import disk as prompt_disk

from tests.engine.test_prompt_disk import TEXT, _run, _serve

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _names(folder: Path) -> list[str]:
    """The entries' names, the first written first."""
    with sqlite3.connect(folder / "index.sqlite") as db:
        return [row[0] for row in db.execute("SELECT name FROM entries ORDER BY last_use")]


def _prompts(path: Path) -> list[list[int]]:
    tokenizer = load_model(path).tokenizer
    return [tokenizer.encode(f"Request number {i}. " + TEXT) for i in range(2)]


@pytest.fixture
async def two_entries(random_model: Path, tmp_path: Path) -> tuple[Path, list[Any]]:
    """A folder holding the entries of two prompts; the prompts with their cold tokens."""
    prompts = _prompts(random_model)
    out, disk = await _run(random_model, prompts, tmp_path)
    assert disk is not None and disk.writes == 2
    return tmp_path, [(p, ids) for p, (ids, _) in zip(prompts, out, strict=True)]


BAD_ROWS = {
    "blocks null": "blocks=NULL",
    "blocks not JSON": "blocks='[oops'",
    "blocks of numbers": "blocks='[1, 2]'",
    "length text": "length='many'",
    "name a path": "name='../../outside.safetensors'",
    "ttl without expires": "ttl=5",
}


@pytest.mark.parametrize("damage", BAD_ROWS.values(), ids=BAD_ROWS.keys())
async def test_a_bad_index_row_is_dropped_and_the_rest_serves(
    random_model: Path, two_entries: tuple[Path, list[Any]], damage: str
) -> None:
    folder, served = two_entries
    (bad, bad_cold), (good, good_cold) = served
    first = _names(folder)[0]
    with sqlite3.connect(folder / "index.sqlite") as db:
        db.execute(f"UPDATE entries SET {damage} WHERE name=?", (first,))
    (again, good_again), engine = await _serve(random_model, [bad, good], folder)
    disk = engine.kv.prompt.disk
    assert disk is not None and engine.stats.disk.dropped == {"row": 1}
    assert again == (bad_cold, 0)  # a cold prefill, the same greedy tokens
    assert good_again[0] == good_cold and good_again[1] > 0.9 * len(good)  # from disk
    # Dropped for good: the next start finds nothing wrong.
    _, disk = await _run(random_model, [good], folder)
    assert disk is not None and disk.health.dropped == {}


async def test_junk_under_entries_is_ignored_and_the_tier_serves(
    random_model: Path, two_entries: tuple[Path, list[Any]]
) -> None:
    folder, served = two_entries
    (prompt, cold), _ = served
    (folder / "entries" / "junk-folder").mkdir()
    (folder / "entries" / "dangling.safetensors").symlink_to(folder / "nowhere")
    ((ids, cached),), engine = await _serve(random_model, [prompt], folder)
    assert engine.stats.disk.dropped == {"junk": 2} and engine.stats.disk.degraded is None
    assert ids == cold and cached > 0.9 * len(prompt)
    assert (folder / "entries" / "junk-folder").is_dir()  # not ours to delete
    assert not (folder / "entries" / "dangling.safetensors").is_symlink()


async def test_an_entry_file_turned_folder_or_symlink_is_dropped(
    random_model: Path, two_entries: tuple[Path, list[Any]]
) -> None:
    folder, served = two_entries
    (first, first_cold), (second, second_cold) = served
    names = _names(folder)
    (folder / "entries" / names[0]).unlink()
    (folder / "entries" / names[0]).mkdir()
    (folder / "entries" / names[1]).unlink()
    (folder / "entries" / names[1]).symlink_to(folder / "nowhere")
    out, engine = await _serve(random_model, [first, second], folder)
    assert out[0] == (first_cold, 0) and out[1][0] == second_cold
    assert out[1][1] < len(second) // 2  # what memory holds of the first prompt, no more
    assert engine.stats.disk.dropped == {"file": 2}


@pytest.mark.parametrize(
    ("code", "reason"), [(errno.ENOSPC, "disk_full"), (errno.EROFS, "read_only")]
)
async def test_a_full_or_read_only_disk_pauses_writes_and_reads_go_on(
    random_model: Path,
    two_entries: tuple[Path, list[Any]],
    monkeypatch: pytest.MonkeyPatch,
    code: int,
    reason: str,
) -> None:
    folder, served = two_entries
    (prompt, cold), _ = served
    fresh = load_model(random_model).tokenizer.encode("Something else entirely. " + TEXT)

    def failing(src: Any, dst: Any) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(prompt_disk.os, "replace", failing)
    out, engine = await _serve(random_model, [fresh, prompt, fresh], folder)
    assert out[1] == (cold, out[1][1]) and out[1][1] > 0.9 * len(prompt)  # still read
    assert out[0][1] == 0 and out[2][0] == out[0][0]  # served, never from disk
    health = engine.stats.disk
    assert health.degraded == reason and health.write_errors >= 1
    assert not [p for p in (folder / "entries").iterdir() if ".tmp" in p.name]


async def test_entries_the_writer_is_behind_for_are_skipped_and_counted(
    random_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write is skipped, not queued, while the writer has its queue full (here: always);
    the skip is counted, as a write's failure is, and the requests are served all the same."""
    monkeypatch.setattr(prompt_disk, "MAX_PENDING", 0)
    prompts = _prompts(random_model)
    out, disk = await _run(random_model, prompts, tmp_path)
    assert disk is not None and disk.writes == 0
    assert disk.health.skipped == len(prompts) and disk.health.write_errors == 0
    assert len(out) == len(prompts) and not list((tmp_path / "entries").iterdir())


async def test_metrics_report_drops_write_errors_and_degradation() -> None:
    from mlx_responses.service.engine.requests import DiskHealth
    from mlx_responses.service.metrics import CoreMetrics, Snapshot
    from mlx_responses.service.models.disk_metrics import watch_prompt_disk

    async def snapshot() -> Snapshot:
        return Snapshot(models=[], jobs={}, stores={}, mlx_memory=None)

    metrics = CoreMetrics(snapshot)
    health = DiskHealth(write_errors=3, skipped=4, degraded="disk_full")
    health.drop("row")
    watch_prompt_disk(metrics, "m", health)
    text = (await metrics.render()).decode()
    assert 'mlx_responses_prompt_disk_dropped_total{kind="row",model_name="m"} 1.0' in text
    assert 'mlx_responses_prompt_disk_write_errors_total{model_name="m"} 3.0' in text
    assert 'mlx_responses_prompt_disk_writes_skipped_total{model_name="m"} 4.0' in text
    assert 'mlx_responses_prompt_disk_degraded{model_name="m",reason="disk_full"} 1.0' in text
