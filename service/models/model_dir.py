"""`--model-dir DIR`: every model folder under DIR, named by its folder name as `--model` is.

A model folder is a folder holding a `config.json` (mlx-lm's, or a VLM's: `--model` tells them
apart when it loads); anything else under DIR (files, hidden folders, folders without one) is
passed over. Scanning reads folder names only, so the pool rescans when a request names a model
it does not know, and on each `/v1/models` listing: a folder added later serves without a
restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mlx_responses.service.config import ConfigError
from mlx_responses.service.models.source import ModelSource


def check_model_dirs(dirs: Sequence[Path]) -> None:
    """A `--model-dir` that is not a folder is a ConfigError (startup exits 2)."""
    for folder in dirs:
        if not folder.expanduser().is_dir():
            raise ConfigError(f"--model-dir {folder}: no such folder")


def scan_model_dirs(dirs: Sequence[Path]) -> list[ModelSource]:
    """The model folders under `dirs`, each dir's by name; a vanished dir gives none."""
    found: list[ModelSource] = []
    for folder in dirs:
        try:
            entries = sorted(folder.expanduser().resolve().iterdir(), key=lambda p: p.name)
        except OSError:
            continue
        found.extend(
            ModelSource(entry.resolve(), entry.name)
            for entry in entries
            if not entry.name.startswith(".") and (entry / "config.json").is_file()
        )
    return found
