"""Regenerates the Python code of the protobuf contract (`mlx_responses/v1/*_pb2*.py[i]`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PACKAGE_DOC = {
    "mlx_responses/__init__.py": '"""Generated protobuf contract (see proto/)."""\n',
    "mlx_responses/v1/__init__.py": '"""Generated code of the mlx_responses.v1 package."""\n',
}


def generate(out_dir: Path) -> list[Path]:
    """Runs protoc on every .proto under proto/, writing into `out_dir`; returns the files."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    for rel, text in PACKAGE_DOC.items():
        (out_dir / rel).write_text(text)
    return sorted(p for p in (out_dir / "mlx_responses").rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT, help="output root (default: repo root)")
    generate(parser.parse_args().out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
