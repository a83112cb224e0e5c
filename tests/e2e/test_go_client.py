"""A Go program (examples/go/mlxclient) against the core: stubs from plain `protoc`, as a Go
developer generates them, built with the Go toolchain and gRPC from the system's packages.

`make setup` installs them where apt can (Debian: golang-go, protobuf-compiler, protoc-gen-go,
protoc-gen-go-grpc, golang-google-grpc-dev, golang-github-golang-protobuf-1-5-dev); the build
runs in GOPATH mode over /usr/share/gocode, since no Go module proxy is reachable here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import free_port, process

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PATH = "github.com/mlx-responses/mlx-responses/gen/go/mlx_responses/v1"
GOCODE = Path("/usr/share/gocode/src")
# gRPC, and github.com/golang/protobuf at 1.4 or later (the APIv2 bridge: older marshals crash).
NEEDED = [
    GOCODE / "google.golang.org/grpc",
    GOCODE / "github.com/golang/protobuf/proto/registry.go",
]
TOOLS = ["go", "protoc", "protoc-gen-go", "protoc-gen-go-grpc"]
missing = [t for t in TOOLS if shutil.which(t) is None] + [str(p) for p in NEEDED if not p.exists()]


def _go_package(proto: Path) -> str:
    line = next(x for x in proto.read_text().splitlines() if x.startswith("option go_package"))
    return line.split('"')[1]


def test_every_proto_declares_the_one_go_import_path() -> None:
    protos = sorted((ROOT / "proto/mlx_responses/v1").glob("*.proto"))
    assert len(protos) == 7
    assert {_go_package(p) for p in protos} == {f"{IMPORT_PATH};mlx_responsesv1"}
    assert IMPORT_PATH in (ROOT / "examples/go/mlxclient/main.go").read_text()
    assert IMPORT_PATH in (ROOT / "docs/api/grpc.md").read_text()


@pytest.mark.skipif(bool(missing), reason=f"needs Go and gRPC for Go: {missing}")
def test_go_client_against_the_core(tmp_path: Path, model_path: Path) -> None:
    gopath = tmp_path / "go"
    src = gopath / "src"
    src.mkdir(parents=True)
    protos = sorted(str(p) for p in (ROOT / "proto/mlx_responses/v1").glob("*.proto"))
    # No M flags, no --go_opt=module: the protos' own go_package places the stubs.
    subprocess.run(
        ["protoc", "-I", str(ROOT / "proto"), f"--go_out={src}", f"--go-grpc_out={src}", *protos],
        check=True,
        timeout=120,
    )
    assert (src / IMPORT_PATH / "responses.pb.go").is_file()
    shutil.copytree(ROOT / "examples/go/mlxclient", src / "mlxclient")
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": f"{gopath}{os.pathsep}{GOCODE.parent}",
        "GOCACHE": os.environ.get("GOCACHE", str(ROOT / "build" / "go-cache")),
        "GOFLAGS": "",
    }
    binary = tmp_path / "mlxclient"
    built = subprocess.run(
        ["go", "build", "-o", str(binary), "mlxclient"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    port = free_port()
    args = ("--log-level", "WARNING", "core", "--model", str(model_path))
    with process(*args, "--grpc-port", str(port), "--api-key", "sk-go") as core:
        ran = subprocess.run(
            [str(binary), "-address", f"127.0.0.1:{port}", "-model", model_path.name,
             "-api-key", "sk-go"],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr + core.output()[-3000:]
    lines = dict(line.split(" ", 1) for line in ran.stdout.splitlines())
    assert lines["health"] == "SERVING"
    response_id, created_status, _ = lines["create"].split()
    assert response_id.startswith("resp_") and created_status == "RESPONSE_STATUS_COMPLETED"
    events, deltas, last, chained = lines["stream"].split()
    assert int(events) >= 6 and int(deltas) >= 1
    assert last == "EVENT_TYPE_RESPONSE_COMPLETED" and chained == "true"
    assert lines["get"] == f"{response_id} true"
    assert lines["delete"] == f"{response_id} true"
    # The status-code table of docs/api/grpc.md, as a Go client reads it.
    assert lines["get-deleted"] == "NotFound NOT_FOUND"
    assert lines["unknown-model"] == "NotFound MODEL_NOT_FOUND"
