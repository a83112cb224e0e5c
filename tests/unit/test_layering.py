"""Data flows one way: `service` and `http_facade` never import each other; `launcher` composes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imported_packages(package: str) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            found.update((str(path.relative_to(ROOT)), name.split(".")[0]) for name in names)
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("service", {"http_facade", "launcher", "mlx_responses_client"}),
        ("http_facade", {"service", "launcher"}),
        # The client gRPC users import stands on the generated code alone.
        ("mlx_responses_client", {"service", "http_facade", "launcher"}),
    ],
)
def test_package_does_not_import(package: str, forbidden: set[str]) -> None:
    offending = sorted(
        f"{file} imports {top}" for file, top in _imported_packages(package) if top in forbidden
    )
    assert offending == []
