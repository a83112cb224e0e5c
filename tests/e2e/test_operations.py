"""Real processes: --metrics-port, request ids across the hop, JSON logs, hub-cache models."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_processes import BIN, _free_port, _process, _wait_healthy
from tests.support.hub_cache import cache_model

pytestmark = pytest.mark.e2e


def _samples(url: str) -> dict[str, float]:
    text = httpx.get(url, timeout=10).text
    return {
        s.name + json.dumps(s.labels, sort_keys=True): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _json_lines(output: bytes) -> list[dict[str, object]]:
    # NOTE: native libraries may print plain lines at exit; every Python log line is JSON.
    lines = [line for line in output.decode().splitlines() if line.startswith("{")]
    return [json.loads(line) for line in lines]


def test_split_core_and_facade_metrics_ids_and_json_logs(model_path: Path) -> None:
    http, grpc_port, metrics_port = _free_port(), _free_port(), _free_port()
    model = model_path.name
    core_args = ("--model", str(model_path), "--grpc-port", str(grpc_port))
    with (
        _process(
            "--log-format", "json", "core", *core_args, "--metrics-port", str(metrics_port)
        ) as core,
        _process(
            "--log-format", "json", "facade", "--core", f"127.0.0.1:{grpc_port}",
            "--port", str(http),
        ) as facade,
    ):  # fmt: skip
        _wait_healthy(http, facade)
        core_url = f"http://127.0.0.1:{metrics_port}/metrics"
        tokens = f'mlx_responses_generation_tokens_total{{"model_name": "{model}"}}'
        before = _samples(core_url)
        reply = httpx.post(
            f"http://127.0.0.1:{http}/v1/responses",
            json={"model": model, "input": "Reply with: hello", "max_output_tokens": 16},
            headers={"x-request-id": "e2e-trace-1"},
            timeout=60,
        )
        assert reply.status_code == 200
        assert reply.headers["x-request-id"] == "e2e-trace-1"
        output_tokens = reply.json()["usage"]["output_tokens"]
        after = _samples(core_url)
        assert after[tokens] - before.get(tokens, 0.0) == output_tokens
        # The façade's own /metrics has its HTTP metrics; the core's live on the core's port.
        facade_samples = _samples(f"http://127.0.0.1:{http}/metrics")
        key = 'mlx_responses_http_requests_total{"method": "POST", "route": "/v1/responses", '
        assert facade_samples[key + '"status": "200"}'] == 1
        assert tokens not in facade_samples
    assert core.stdout is not None and facade.stdout is not None
    core_lines = _json_lines(core.stdout.read())
    facade_lines = _json_lines(facade.stdout.read())
    for lines, logger in (
        (core_lines, "mlx_responses.service.responses.pipeline"),
        (facade_lines, "mlx_responses.http_facade.access"),
    ):
        assert {"time", "level", "logger", "message"} <= set(lines[0])
        ours = [line for line in lines if line.get("request_id") == "e2e-trace-1"]
        assert any(line["logger"] == logger for line in ours), lines


def test_serve_a_repo_id_from_the_local_hub_cache(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_model(tmp_path, "someone/tiny-chat", model_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # belt and braces: nothing may leave the machine
    missing = subprocess.run(
        [str(BIN / "mlx-responses"), "core", "--model", "someone/not-cached"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 2
    assert "not in the local Hugging Face cache" in missing.stderr
    http, grpc_port = _free_port(), _free_port()
    with _process(
        "serve", "--model", "someone/tiny-chat", "--port", str(http), "--grpc-port", str(grpc_port)
    ) as proc:
        _wait_healthy(http, proc)
        models = httpx.get(f"http://127.0.0.1:{http}/v1/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["someone/tiny-chat"]
        reply = httpx.post(
            f"http://127.0.0.1:{http}/v1/responses",
            json={"model": "someone/tiny-chat", "input": "Reply with: hello"},
            timeout=60,
        )
        assert reply.status_code == 200
        assert reply.json()["model"] == "someone/tiny-chat"
        assert reply.json()["output"][0]["content"][0]["text"] == "hello"
