"""Data flows one way: `service` and `http_facade` never import each other; `launcher` composes.

Two exceptions, both standard-library-only leaves, so the façade still pulls neither the core nor
MLX (tested below, statically and in a fresh interpreter): `service.flags`, the one declaration
of every flag, and `service.envelope`, the one builder of the OpenAI error envelope that every
HTTP surface (the façade and the core's metrics endpoint) answers with.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Modules of a forbidden package that a package may import all the same.
ALLOWED = {"http_facade": ("service.flags", "service.envelope")}
STDLIB_ONLY = ("service/__init__.py", "service/flags.py", "service/envelope.py")


def _targets(path: Path) -> list[str]:
    """Every module a file imports by absolute name (`from a import b` counts as a.b)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _imported_packages(package: str) -> set[tuple[str, str]]:
    allowed = ALLOWED.get(package, ())
    found: set[tuple[str, str]] = set()
    for path in (ROOT / package).rglob("*.py"):
        for target in _targets(path):
            if any(target == a or target.startswith(a + ".") for a in allowed):
                continue
            found.add((str(path.relative_to(ROOT)), target.split(".")[0]))
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


@pytest.mark.parametrize("file", STDLIB_ONLY)
def test_flag_declarations_import_the_standard_library_only(file: str) -> None:
    tops = {target.split(".")[0] for target in _targets(ROOT / file)}
    assert tops <= set(sys.stdlib_module_names) | {"__future__"}


def test_the_facade_config_pulls_neither_the_core_nor_mlx() -> None:
    code = (
        "import sys, http_facade.config, http_facade.errors; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mlx', 'mlx_lm', 'service')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['service', 'service.envelope', 'service.flags']"
