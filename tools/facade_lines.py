"""Counts the façade's request decoders and OpenAPI schemas (issue #52's measure), by file.

The rule: for the four dialects the issue counted (Responses, Chat, Completions, Anthropic),
the decoders are each dialect's `to_proto.py` and `protocol.py`, the item decoding of Responses
(`builtin_items.py`) and the kit's decoding modules (`decode.py`, `fields.py`, `tools.py`,
`shapes.py`); the schemas are each dialect's `openapi.py` and the kit's (`openapi.py`,
`openapi_document.py`; before the move, `http_facade/openapi.py`). Lines as `wc -l` counts them.
At the issue's baseline (9968433) this rule counts 3,335; the issue's 2,822 (1,411 + 1,411)
left out `builtin_items.py` (421) and the OpenAPI kit (`openapi_kit.py`, 92). The built-in
items' encoders (proto -> JSON, about 80 lines) moved from `builtin_items.py` to
`responses/from_proto.py`, beside the other item encoders: they are neither decoders nor
schemas.

    python tools/facade_lines.py [REV]     # the working tree, or git revision REV
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIALECTS = ("responses", "chat", "completions", "anthropic")
DECODERS = (
    *(f"{d}/{f}" for d in DIALECTS for f in ("to_proto.py", "protocol.py")),
    "responses/builtin_items.py",
    "builtin_items.py",
    "to_proto.py",
    *(f"kit/{f}" for f in ("decode.py", "fields.py", "tools.py", "shapes.py")),
)
SCHEMAS = (
    *(f"{d}/openapi.py" for d in DIALECTS),
    "openapi.py",
    "openapi_kit.py",
    "kit/openapi.py",
    "kit/openapi_document.py",
)


def _lines(path: str, rev: str | None) -> int | None:
    """The line count of http_facade/`path` in the tree or at `rev`; None if it is not there."""
    if rev is None:
        file = ROOT / "http_facade" / path
        return len(file.read_text().splitlines()) if file.exists() else None
    shown = subprocess.run(
        ["git", "show", f"{rev}:http_facade/{path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return len(shown.stdout.splitlines()) if shown.returncode == 0 else None


def main(rev: str | None) -> None:
    total = 0
    for title, files in (("decoders", DECODERS), ("schemas", SCHEMAS)):
        counts = {f: n for f in files if (n := _lines(f, rev)) is not None}
        for file, n in counts.items():
            print(f"  {n:5d}  {file}")
        print(f"{sum(counts.values()):7d}  {title}")
        total += sum(counts.values())
    print(f"{total:7d}  together (the issue's target: at most 1,411)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
