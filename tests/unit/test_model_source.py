"""--model: a folder as it is, a repo id from the local hub cache, never a download by default."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub.constants
import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.models.source import ModelNotFoundError, resolve_model

from tests.support.hub_cache import cache_model


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return tmp_path


def test_a_folder_is_used_as_it_is() -> None:
    source = resolve_model(BUNDLED_MODEL)
    assert source.folder == BUNDLED_MODEL.resolve()
    assert source.name == "tiny-chat"


def test_a_cached_repo_id_resolves_to_its_snapshot(hub_cache: Path) -> None:
    snapshot = cache_model(hub_cache, "someone/tiny-chat", BUNDLED_MODEL)
    source = resolve_model(Path("someone/tiny-chat"))
    assert source.folder == snapshot
    assert source.name == "someone/tiny-chat"
    assert (source.folder / "config.json").is_file()


def test_an_uncached_repo_id_is_refused_without_download(hub_cache: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="--allow-download"):
        resolve_model(Path("someone/not-cached"))


def test_a_missing_path_is_refused() -> None:
    with pytest.raises(ModelNotFoundError, match="no such folder"):
        resolve_model(Path("/nowhere/at/all"))


def test_a_folder_without_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"no config\.json"):
        resolve_model(tmp_path)
