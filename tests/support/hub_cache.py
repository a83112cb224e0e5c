"""A local Hugging Face hub cache holding a copy of a model folder under a repo id."""

from __future__ import annotations

import shutil
from pathlib import Path

COMMIT = "0" * 40


def cache_model(cache: Path, repo_id: str, folder: Path) -> Path:
    """Lays `folder` out as the hub caches `repo_id` at revision main; returns the snapshot."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    shutil.copytree(folder, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot
