"""A revision's façade and core laid out as installed, to import beside this tree's (the
façade's CPU benchmark and tools/decoder_diff.py compare two trees)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def export(rev: str, into: Path) -> Path:
    """REV's façade and core, laid out as installed (`mlx_responses.http_facade`, ...), with
    this tree's generated protobuf modules (git does not hold them)."""
    root = into / "mlx_responses"
    shutil.copytree(ROOT / "mlx_responses", root)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "http_facade", "service"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return into


def importing(tree: Path | None) -> dict[str, str]:
    """The environment of a child process that imports `tree`'s façade and core (an `export`,
    found before the editable install's finder); None: this tree's, the environment as it is."""
    env = dict(os.environ)
    if tree is not None and tree != ROOT:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    return env
