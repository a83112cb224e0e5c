"""The zoo's models, each built once per session (`tests/support/zoo.py`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.zoo import build_zoo_model


@pytest.fixture(scope="session")
def zoo_model(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`model_type` -> the folder of its zoo model, built on first use."""
    root = tmp_path_factory.mktemp("zoo")
    built: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type not in built:
            built[model_type] = build_zoo_model(model_type, root / model_type)
        return built[model_type]

    return get
