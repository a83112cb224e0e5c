"""Builds /openapi.json with this tree's façade and git revision REV's, and says whether they
are byte-equal (as the app serves it: json.dumps of the document), else where they differ.

    python tools/openapi_diff.py main
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _document() -> str:
    """The document the tree this interpreter imports serves, as its bytes."""
    from mlx_responses.http_facade.app import API_PARTS, create_app
    from mlx_responses.http_facade.kit.openapi_document import build_document

    return json.dumps(build_document(create_app("127.0.0.1:1"), API_PARTS, "0"))


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b) and set(a) == set(b):
            return [f"{path}: key order {list(a)} != {list(b)}"]
        keys = [*a, *(k for k in b if k not in a)]
        return [d for k in keys for d in _diff(a.get(k), b.get(k), f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in _diff(x, y, f"{path}/{i}")]
    return [] if a == b else [f"{path}: {json.dumps(a)[:300]}\n   != {json.dumps(b)[:300]}"]


def main(rev: str) -> int:
    if rev == "--dump":
        sys.stdout.write(_document())
        return 0
    sys.path.insert(0, str(ROOT))
    from tools.rev_tree import export, importing

    texts = []
    with tempfile.TemporaryDirectory() as tmp:
        for tree in (export(rev, Path(tmp) / "rev"), ROOT):
            command = [sys.executable, str(Path(__file__).resolve()), "--dump"]
            env = importing(tree)
            done = subprocess.run(command, env=env, cwd=tree, check=True, stdout=subprocess.PIPE)
            texts.append(done.stdout.decode())
    if texts[0] == texts[1]:
        print(f"byte-equal ({len(texts[0])} bytes)")
        return 0
    differ = _diff(json.loads(texts[0]), json.loads(texts[1]))
    print("\n".join(differ[:40]))
    print(f"{len(differ)} differences ({rev}: {len(texts[0])} bytes, this tree: {len(texts[1])})")
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
