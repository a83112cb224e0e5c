"""The contract for other languages: buf.gen.yaml generates Go stubs with local plugins only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mlx_responses.v1 import (
    compaction_service_pb2,
    generation_service_pb2,
    jobs_service_pb2,
    storage_service_pb2,
)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BUF = ["npx", "--yes", "@bufbuild/buf@1.75.0"]
SERVICES = [
    name
    for module in (
        generation_service_pb2,
        storage_service_pb2,
        jobs_service_pb2,
        compaction_service_pb2,
    )
    for name in module.DESCRIPTOR.services_by_name
]


@pytest.mark.skipif(
    shutil.which("protoc-gen-go") is None
    or shutil.which("protoc-gen-go-grpc") is None
    or shutil.which("npx") is None,
    reason="needs npx and protoc-gen-go(-grpc) (make setup installs them where apt can)",
)
def test_buf_gen_yaml_generates_go_stubs(tmp_path: Path) -> None:
    done = subprocess.run(
        [*BUF, "generate", "--template", "buf.gen.yaml", "-o", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "gen" / "go" / "mlx_responses" / "v1"
    assert (out / "responses.pb.go").is_file()
    stubs = "".join(p.read_text() for p in out.glob("*_grpc.pb.go"))
    assert len(SERVICES) == 4
    for service in SERVICES:
        assert f"func New{service}Client(" in stubs
        assert f"func Register{service}Server(" in stubs
    assert "package mlx_responsesv1" in (out / "responses.pb.go").read_text()
