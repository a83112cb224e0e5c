"""MkDocs hook: the build fails while a generated page (tools/gen_docs.py) is stale."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `tools` is not installed; the project itself is

from mkdocs.exceptions import PluginError  # noqa: E402

from tools.gen_docs import stale_pages  # noqa: E402


def on_pre_build(config: Any) -> None:
    stale = stale_pages(Path(config["docs_dir"]))
    if stale:
        names = ", ".join(str(p) for p in stale)
        raise PluginError(f"{names} stale: run `python -m tools.gen_docs` (or `make docs`)")
