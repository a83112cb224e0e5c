"""The zoo's models, each built once per session (`tests/support/zoo.py`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.zoo import build_zoo_model, quantize_zoo_model, write_unbuildable


@pytest.fixture(scope="session")
def zoo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zoo")


@pytest.fixture(scope="session")
def zoo_model(zoo_root: Path) -> Callable[[str], Path]:
    """`model_type` -> the folder of its zoo model, built on first use (where mlx-lm cannot
    build one, its config and tokenizer alone: what loading must refuse)."""
    built: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type not in built:
            out = zoo_root / model_type
            try:
                built[model_type] = build_zoo_model(model_type, out)
            except (Exception, SystemExit):  # mlx-lm's olmo exits without its package
                built[model_type] = write_unbuildable(model_type, out)
        return built[model_type]

    return get


@pytest.fixture(scope="session")
def zoo_quantized(zoo_root: Path, zoo_model: Callable[[str], Path]) -> Callable[[str], Path]:
    """`model_type` -> its zoo model quantized to 4 bits (mlx-lm's quantization)."""
    built: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type not in built:
            out = zoo_root / f"{model_type}-4bit"
            built[model_type] = quantize_zoo_model(zoo_model(model_type), out)
        return built[model_type]

    return get
