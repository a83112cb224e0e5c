"""The installed shape: one namespace, every package listed, nothing else at the top."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAPPED = {"service", "http_facade", "launcher"}


def _pyproject() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _installed_name(init: Path) -> str:
    parts = init.parent.relative_to(ROOT).parts
    return ".".join(("mlx_responses", *parts) if parts[0] in MAPPED else parts)


def test_every_package_folder_is_listed() -> None:
    """A sub-package missing from pyproject's list would be left out of the wheel."""
    roots = [*MAPPED, "mlx_responses", "mlx_responses_client"]
    found = {
        _installed_name(init)
        for root in roots
        for init in (ROOT / root).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert set(_pyproject()["tool"]["setuptools"]["packages"]) == found


def test_nothing_lands_outside_the_namespace() -> None:
    """`service`, `http_facade` and `launcher` install under `mlx_responses`."""
    setuptools = _pyproject()["tool"]["setuptools"]
    tops = {name.split(".")[0] for name in setuptools["packages"]}
    assert tops == {"mlx_responses", "mlx_responses_client"}
    assert setuptools["package-dir"] == {f"mlx_responses.{name}": name for name in MAPPED}


def test_the_command_is_the_namespaced_launcher() -> None:
    assert _pyproject()["project"]["scripts"]["mlx-responses"] == "mlx_responses.launcher.cli:main"
