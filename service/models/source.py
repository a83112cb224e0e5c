"""Where `--model` points: a local folder, or a Hugging Face repo id in the local hub cache; and
the id each configured model is served under."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlx_responses.service.config import ConfigError

# `org/name` (one slash, the hub's characters): anything else is a path.
REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class ModelNotFoundError(ValueError):
    """`--model` names neither a folder nor a cached (or, if allowed, downloadable) repo."""


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: its folder and the name clients use when none is given."""

    folder: Path
    name: str


def resolve_model(model: Path, allow_download: bool = False) -> ModelSource:
    """The folder of `model`: an existing path as it is, else a hub repo id from the cache.

    Without `allow_download` nothing leaves the machine (`local_files_only`); with it the hub
    downloads what is missing, showing its own progress bars.
    """
    if model.expanduser().exists():
        folder = model.expanduser().resolve()
        if not (folder / "config.json").is_file():
            raise ModelNotFoundError(
                f"--model {model}: not an mlx-lm model folder (no config.json)"
            )
        return ModelSource(folder, folder.name)
    repo_id = str(model)
    if not REPO_ID.fullmatch(repo_id):
        raise ModelNotFoundError(f"--model {repo_id}: no such folder")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id, local_files_only=not allow_download))
    except LocalEntryNotFoundError as exc:
        raise ModelNotFoundError(
            f"--model {repo_id}: not a folder and not in the local Hugging Face cache "
            "(pass --allow-download to fetch it)"
        ) from exc
    except Exception as exc:  # the hub's network and repo errors
        raise ModelNotFoundError(f"--model {repo_id}: {type(exc).__name__}: {exc}") from exc
    return ModelSource(folder, repo_id)


def served_ids(sources: Sequence[ModelSource], aliases: Sequence[str]) -> list[str]:
    """The id of each model: the i-th `--model-alias` names the i-th `--model`, the rest keep
    their own names (folder name or repo id); two models of one name are a ConfigError."""
    ids = [*aliases, *(source.name for source in sources[len(aliases) :])]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ConfigError(
            f"several --model entries are named {', '.join(twice)}; name them with --model-alias"
        )
    return ids
