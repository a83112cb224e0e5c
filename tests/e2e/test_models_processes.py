"""Several --model through real processes: listing, selection, lazy loads, LRU unloads."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mlx_responses.service.engine.model import context_length_of

from tests.http.test_metrics import scrape, value
from tests.support.processes import BIN, free_port, process, wait_status
from tests.support.random_model import build_random_model

pytestmark = pytest.mark.e2e


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def create(base: str, model: str) -> dict[str, Any]:
    body = {"model": model, "input": "Reply with: hello", "max_output_tokens": 8}
    reply = httpx.post(f"{base}/v1/responses", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def test_serve_two_models_lazily_and_unload_the_least_recently_used(
    model_path: Path, tmp_path: Path
) -> None:
    big = build_random_model(
        tmp_path / "big-chat",
        hidden_size=512,
        layers=4,
        intermediate_size=2048,
        heads=8,
        kv_heads=4,
        tokenizer_from=model_path,
    )
    size = (big / "model.safetensors").stat().st_size
    tiny_size = (model_path / "model.safetensors").stat().st_size
    http = free_port()
    with process(
        "serve", "--model", str(model_path), "--model", str(big),
        "--model-alias", "tiny", "--model-alias", "big", "--max-loaded-models", "1",
        "--port", str(http), "--grpc-port", str(free_port()),
    ) as proc:  # fmt: skip
        wait_status(http, 200, proc)
        base = f"http://127.0.0.1:{http}"

        def state() -> tuple[float, float, float]:
            samples = scrape(f"{base}/metrics")
            return (
                value(samples, "mlx_responses_model_loaded", model_name="tiny"),
                value(samples, "mlx_responses_model_loaded", model_name="big"),
                value(samples, "mlx_responses_mlx_active_memory_bytes"),
            )

        listed = httpx.get(f"{base}/v1/models", timeout=10).json()["data"]
        window = context_length_of(json.loads((model_path / "config.json").read_text()))
        assert [(m["id"], m["context_length"]) for m in listed] == [("tiny", window), ("big", 4096)]
        # Lazy: `big` is listed but not in memory before its first request.
        tiny_loaded, big_loaded, active_before = state()
        assert (tiny_loaded, big_loaded) == (1, 0)
        assert active_before < size
        assert create(base, "big")["model"] == "big"
        tiny_loaded, big_loaded, active_big = state()
        assert (tiny_loaded, big_loaded) == (0, 1)  # the limit unloaded `tiny`
        assert active_big >= size
        rss_big = rss_bytes(proc.proc.pid)
        assert create(base, "tiny")["model"] == "tiny"
        tiny_loaded, big_loaded, active_tiny = state()
        assert (tiny_loaded, big_loaded) == (1, 0)
        # The weights really left: MLX's count, and the process's resident memory.
        assert active_big - active_tiny >= 0.9 * (size - tiny_size)
        assert rss_big - rss_bytes(proc.proc.pid) >= 0.5 * (size - tiny_size)
        assert "model big unloaded" in proc.output()


@pytest.mark.parametrize("download", [[], ["--allow-download"]], ids=["local", "allow-download"])
def test_two_models_named_alike_fail_at_startup(
    model_path: Path, tmp_path: Path, download: list[str]
) -> None:
    """Exit 2, also where --allow-download defers finding the models to the core's load."""
    twin = tmp_path / model_path.name
    twin.symlink_to(model_path)
    command = ["core", "--model", str(model_path), "--model", str(twin), *download]
    done = subprocess.run(
        [str(BIN / "mlx-responses"), *command, "--grpc-port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"several --model entries are named {model_path.name}" in done.stderr + done.stdout


def test_serve_unloads_an_idle_model_past_its_keep_alive(model_path: Path, tmp_path: Path) -> None:
    """--keep-alive through a real process: the idle model leaves and the process's RSS drops
    by its weights, each time (the second load's buffers come from the C heap, which keeps
    freed pages unless trimmed); the next request loads it again."""
    big = build_random_model(
        tmp_path / "big-chat",
        hidden_size=512,
        layers=4,
        intermediate_size=2048,
        heads=8,
        kv_heads=4,
        tokenizer_from=model_path,
    )
    size = (big / "model.safetensors").stat().st_size
    http = free_port()
    with process(
        "serve", "--model", str(model_path), "--model", str(big), "--pin", model_path.name,
        "--keep-alive", "1s", "--port", str(http), "--grpc-port", str(free_port()),
    ) as proc:  # fmt: skip
        wait_status(http, 200, proc)
        base = f"http://127.0.0.1:{http}"

        def unloads() -> float:
            samples = scrape(f"{base}/metrics")
            name = "mlx_responses_model_unloads_total"
            return value(samples, name, model_name=big.name, reason="keep_alive")

        for round_ in (1, 2, 3):
            assert create(base, big.name)["model"] == big.name  # loaded (again)
            rss_loaded = rss_bytes(proc.proc.pid)
            listed = {m["id"]: m for m in httpx.get(f"{base}/v1/models", timeout=10).json()["data"]}
            assert listed[big.name]["loaded"] and listed[big.name]["memory_bytes"] >= 0.99 * size
            assert listed[model_path.name]["pinned"]
            assert listed[model_path.name]["expires_at"] is None
            deadline = time.monotonic() + 30
            while unloads() < round_:
                assert time.monotonic() < deadline, "never unloaded"
                time.sleep(0.1)
            assert rss_loaded - rss_bytes(proc.proc.pid) >= 0.5 * size, round_
        assert f"model {big.name} unloaded" in proc.output()
        # The pinned model stayed through it all.
        samples = scrape(f"{base}/metrics")
        assert value(samples, "mlx_responses_model_loaded", model_name=model_path.name) == 1


def test_a_pin_no_model_answers_to_fails_at_startup(model_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "mlx-responses"), "core", "--model", str(model_path), "--pin", "nope",
         "--grpc-port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr + done.stdout
    assert "--pin nope: no --model or --model-dir model is named so" in done.stderr + done.stdout
