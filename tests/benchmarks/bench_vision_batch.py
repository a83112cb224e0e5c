"""Concurrent image requests on a random-weight Qwen2-VL: ours against mlx-vlm's own server.

Builds the tests' tiny random VLM (tests/support/random_vlm.py), serves it on the real stack,
and sends 1, 4 and 8 image requests at once (each its own image, greedy, a fixed number of
tokens: the random model never ends early) through Chat Completions; then starts
`python -m mlx_vlm.server` on the same folder on a free port and sends the same requests. Prints
each server's wall time and throughput (generated tokens per second) per concurrency, the
ratio of ours to mlx-vlm's, and ours at 4 against one alone (the goal: 4 at once within 1.5x
the time of one). Not a test.

    .venv/bin/python tests/benchmarks/bench_vision_batch.py [--tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_responses.service.engine.blas import preload_blas

preload_blas()

import httpx  # noqa: E402
from PIL import Image  # noqa: E402

from tests.support.processes import free_port  # noqa: E402
from tests.support.random_vlm import build_random_vlm  # noqa: E402
from tests.support.stack import Stack  # noqa: E402

LEVELS = (1, 4, 8)


def _image(seed: int, side: int = 112) -> str:
    pixels = bytes((i * 7919 + seed * 104729) % 251 for i in range(side * side * 3))
    buffer = io.BytesIO()
    Image.frombytes("RGB", (side, side), pixels).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _body(model: str, seed: int, tokens: int) -> dict:
    return {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": _image(seed)}},
                    {"type": "text", "text": f"Describe picture {seed}."},
                ],
            }
        ],
        "max_tokens": tokens,
        "temperature": 0,
    }


def _send(url: str, body: dict) -> int:
    reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    reply.raise_for_status()
    return int(reply.json()["usage"]["completion_tokens"])


def _wave(url: str, model: str, n: int, tokens: int, seed: int) -> tuple[float, int]:
    """`n` requests at once: the wall time until the last one ends, and tokens generated."""
    bodies = [_body(model, seed + k, tokens) for k in range(n)]
    with ThreadPoolExecutor(n) as pool:
        started = time.perf_counter()
        generated = sum(pool.map(lambda body: _send(url, body), bodies))
        return time.perf_counter() - started, generated


def _measure(url: str, model: str, tokens: int, repeats: int) -> dict[int, tuple[float, float]]:
    """Per concurrency: the median wall time and its throughput (tokens per second)."""
    _wave(url, model, 2, tokens, 10_000)  # warm-up: compile, first-call costs
    out = {}
    for n in LEVELS:
        runs = [_wave(url, model, n, tokens, 100 * r + 1000 * n) for r in range(repeats)]
        wall = statistics.median(w for w, _ in runs)
        generated = statistics.median(g for _, g in runs)
        out[n] = (wall, generated / wall)
    return out


def _mlx_vlm(folder: Path, tokens: int, repeats: int) -> dict[int, tuple[float, float]]:
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="mlx-vlm-server-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlx_vlm.server",
            "--model",
            str(folder),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--log-level",
            "WARNING",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mlx_vlm.server did not start: " + Path(log.name).read_text())
            time.sleep(0.5)
        return _measure(url, str(folder), tokens, repeats)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32, help="generated per request")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_random_vlm(Path(tmp) / "tiny-vlm")
        with Stack.running(model_path=folder, store_url="memory") as stack:
            model = stack.settings.models[0].name
            ours = _measure(stack.base_url, model, args.tokens, args.repeats)
            batch = stack.engine_stats.max_batch_seen
        theirs = _mlx_vlm(folder, args.tokens, args.repeats)
    print(f"tiny random Qwen2-VL, {args.tokens} tokens per request, median of {args.repeats}:")
    for n in LEVELS:
        (wall, rate), (their_wall, their_rate) = ours[n], theirs[n]
        print(
            f"  {n} at once: ours {wall * 1000:.0f} ms {rate:.0f} tok/s, mlx_vlm.server "
            f"{their_wall * 1000:.0f} ms {their_rate:.0f} tok/s = {rate / their_rate:.2f}x"
        )
    print(
        f"  ours, 4 at once against one: {ours[4][0] / ours[1][0]:.2f}x the wall time "
        f"(goal <= 1.5x); largest batch seen {batch}"
    )


if __name__ == "__main__":
    main()
