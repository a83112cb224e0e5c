"""mypy over the installed namespace: `mlx_responses.service`, `.http_facade`, `.launcher`.

The repository keeps service/, http_facade/ and launcher/ at the top (the design card) and
setuptools maps them under `mlx_responses` (pyproject's package-dir). mypy resolves imports from
folders, not from an editable install's import hook, so this lays the installed shape out as
links under build/typecheck/ and checks it there: every import is then typed, none is Any.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "typecheck"
MAPPED = ("service", "http_facade", "launcher")
PACKAGES = [*(f"mlx_responses.{name}" for name in MAPPED), "mlx_responses_client"]


def _link(target: Path, link: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def lay_out() -> None:
    namespace = TREE / "mlx_responses"
    namespace.mkdir(parents=True, exist_ok=True)
    _link(ROOT / "mlx_responses" / "__init__.py", namespace / "__init__.py")
    _link(ROOT / "mlx_responses" / "v1", namespace / "v1")
    for name in MAPPED:
        _link(ROOT / name, namespace / name)
    _link(ROOT / "mlx_responses_client", TREE / "mlx_responses_client")


def main() -> int:
    lay_out()
    mypy = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    for package in PACKAGES:
        mypy += ["-p", package]
    return subprocess.call([*mypy, *sys.argv[1:]], cwd=TREE)


if __name__ == "__main__":
    sys.exit(main())
