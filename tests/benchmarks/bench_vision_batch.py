"""Concurrent image requests on a random-weight Qwen2-VL: ours against mlx-vlm's own server.

Builds the tests' tiny random VLM (tests/support/random_vlm.py), serves it with `serve` as its
own process (as `mlx_vlm.server` runs, and as a client meets either), and sends 1, 4 and 8 image
requests at once (each its own image, greedy, a fixed number of tokens: the random model never
ends early) through Chat Completions; then starts `python -m mlx_vlm.server` on the same folder
on a free port and sends the same requests. Prints each server's wall time and throughput
(generated tokens per second) per concurrency, the ratio of ours to mlx-vlm's, and ours at 4
against one alone (the goal: 4 at once within 1.5x the time of one). The same waves then go to
the stack in this process (the tests' `Stack`: there the client's threads share the server's GIL
and cores) and to our engine alone (its EngineWorker, no HTTP): on a machine whose cores are
shared, the request path's own CPU time (HTTP, gRPC, rendering, the processor) grows with the
requests at once, and the engine's figure is the batching's. Not a test.

    .venv/bin/python tests/benchmarks/bench_vision_batch.py [--tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_responses.service.engine.blas import preload_blas

preload_blas()

import httpx  # noqa: E402
from mlx_responses.service.engine.image_prompt import VisionInputs  # noqa: E402
from mlx_responses.service.engine.requests import SamplingParams  # noqa: E402
from mlx_responses.service.engine.worker import EngineWorker  # noqa: E402
from mlx_responses.service.models.vision_runtime import load_vision_model  # noqa: E402
from PIL import Image  # noqa: E402

from tests.support.engine import collect  # noqa: E402
from tests.support.processes import free_port, process, wait_status  # noqa: E402
from tests.support.random_qwen3_5_vl import build_random_qwen3_5_vl  # noqa: E402
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


def _send(client: httpx.Client, body: dict) -> int:
    reply = client.post("/v1/chat/completions", json=body)
    reply.raise_for_status()
    return int(reply.json()["usage"]["completion_tokens"])


def _wave(client: httpx.Client, model: str, n: int, tokens: int, seed: int) -> tuple[float, int]:
    """`n` requests at once: the wall time until the last one ends, and tokens generated."""
    bodies = [_body(model, seed + k, tokens) for k in range(n)]
    with ThreadPoolExecutor(n) as pool:
        started = time.perf_counter()
        generated = sum(pool.map(lambda body: _send(client, body), bodies))
        return time.perf_counter() - started, generated


Figures = dict[int, tuple[float, float, float]]


def _measure(url: str, model: str, tokens: int, repeats: int) -> Figures:
    """Per concurrency: the median wall time, its throughput (tokens per second), and the
    best wall time (on a shared machine, the least disturbed run)."""
    # One client for every request, as an SDK keeps one: `httpx.post` builds a client per call,
    # and its TLS context alone (even for http://) took ~27 ms of CPU a request here, in this
    # process, on the cores the server shares: more than the server's own request path.
    with httpx.Client(base_url=url, timeout=600) as client:
        _wave(client, model, 2, tokens, 10_000)  # warm-up: compile, first-call costs
        out = {}
        for n in LEVELS:
            runs = [_wave(client, model, n, tokens, 100 * r + 1000 * n) for r in range(repeats)]
            wall = statistics.median(w for w, _ in runs)
            generated = statistics.median(g for _, g in runs)
            out[n] = (wall, generated / wall, min(w for w, _ in runs))
    return out


def _mlx_vlm(folder: Path, tokens: int, repeats: int) -> Figures:
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


def _engine_alone(folder: Path, tokens: int, repeats: int) -> dict[int, float]:
    """Per concurrency: the best wall time of the same image prompts on our engine alone."""
    import numpy as np

    async def run() -> dict[int, float]:
        worker = EngineWorker(lambda: load_vision_model(folder, "tiny-vlm"))
        loaded = await worker.start()
        processor = loaded.processor

        def prompt(seed: int) -> tuple[list[int], VisionInputs]:
            raw = base64.b64decode(_image(seed).split(",")[1])
            picture = Image.open(io.BytesIO(raw)).convert("RGB")
            text = (
                "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
                f"Describe picture {seed}.<|im_end|>\n<|im_start|>assistant\n"
            )
            out = processor(
                text=[text], images=[picture], return_tensors="np", add_special_tokens=False
            )
            arrays = {key: np.array(value) for key, value in out.items()}
            ids = [int(t) for t in arrays["input_ids"][0]]
            inputs = VisionInputs(arrays["pixel_values"], arrays["image_grid_thw"], (str(seed),))
            return ids, inputs

        async def wave(n: int, seed: int) -> float:
            prompts = [prompt(seed + k) for k in range(n)]
            started = time.perf_counter()
            sampling = SamplingParams(max_tokens=tokens, temperature=0.0)
            streams = [worker.submit(ids, sampling, vision=inputs) for ids, inputs in prompts]
            await asyncio.gather(*(collect(stream) for stream in streams))
            return time.perf_counter() - started

        try:
            await wave(2, 10_000)
            return {
                n: min([await wave(n, 100 * r + 1000 * n) for r in range(repeats)]) for n in LEVELS
            }
        finally:
            worker.stop()

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32, help="generated per request")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--family", choices=("qwen2_vl", "qwen3_5"), default="qwen2_vl")
    parser.add_argument("--engine-only", action="store_true")
    args = parser.parse_args()
    build = build_random_qwen3_5_vl if args.family == "qwen3_5" else build_random_vlm
    if args.engine_only:
        _engine_only(build, args.family, args.tokens, args.repeats)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = build(Path(tmp) / "tiny-vlm")
        model = folder.name
        # Ours as its own process (`serve`, default flags), as mlx_vlm.server runs and as a
        # client meets it; then in this process (the stack the tests run), where the client's
        # threads take the server's GIL and cores.
        port = free_port()
        with process(
            "serve", "--model", str(folder), "--port", str(port), "--grpc-port", str(free_port())
        ) as proc:
            wait_status(port, 200, proc)
            ours = _measure(f"http://127.0.0.1:{port}", model, args.tokens, args.repeats)
        with Stack.running(model_path=folder, store_url="memory") as stack:
            model = stack.settings.models[0].name
            shared = _measure(stack.base_url, model, args.tokens, args.repeats)
            batch = stack.engine_stats.max_batch_seen
        theirs = _mlx_vlm(folder, args.tokens, args.repeats)
        alone = _engine_alone(folder, args.tokens, args.repeats)
    print(
        f"tiny random {args.family}, {args.tokens} tokens per request, median of {args.repeats} "
        "(best in brackets):"
    )
    for n in LEVELS:
        (wall, rate, best), (their_wall, their_rate, their_best) = ours[n], theirs[n]
        print(
            f"  {n} at once: ours {wall * 1000:.0f} ms ({best * 1000:.0f}) {rate:.0f} tok/s, "
            f"mlx_vlm.server {their_wall * 1000:.0f} ms ({their_best * 1000:.0f}) "
            f"{their_rate:.0f} tok/s = {rate / their_rate:.2f}x"
        )
    print(
        f"  ours, 4 at once against one: {ours[4][0] / ours[1][0]:.2f}x the wall time "
        f"({ours[4][2] / ours[1][2]:.2f}x best to best; goal <= 1.5x)"
    )
    print(
        "  ours in the client's process (one GIL): "
        + ", ".join(f"{n} at once {shared[n][0] * 1000:.0f} ms" for n in LEVELS)
        + f"; 4 at once against one: {shared[4][0] / shared[1][0]:.2f}x; largest batch seen {batch}"
    )
    print(
        "  our engine alone (no HTTP), best: "
        + ", ".join(f"{n} at once {alone[n] * 1000:.0f} ms" for n in LEVELS)
        + f"; 4 at once against one: {alone[4] / alone[1]:.2f}x"
    )


def _engine_only(build: Any, family: str, tokens: int, repeats: int) -> None:
    """Our engine alone, batched, then one request at a time (the family not batched)."""
    from mlx_responses.service.engine.vision import side

    with tempfile.TemporaryDirectory() as tmp:
        folder = build(Path(tmp) / "tiny-vlm")
        batched = _engine_alone(folder, tokens, repeats)
        kept = side.BATCHED
        side.BATCHED = tuple(f for f in kept if f != family)
        try:
            serial = _engine_alone(folder, tokens, repeats)
        finally:
            side.BATCHED = kept
    print(
        f"tiny random {family}, {tokens} tokens per request, our engine alone, best of {repeats}:"
    )
    for n in LEVELS:
        print(
            f"  {n} at once: batched {batched[n] * 1000:.0f} ms, one at a time "
            f"{serial[n] * 1000:.0f} ms = {serial[n] / batched[n]:.2f}x"
        )


if __name__ == "__main__":
    main()
