"""The model lifecycle through a real `serve` process: what a load costs, what an unload gives
back, and what the prompt cache's disk tier saves on the request after a reload.

A random model of `--hidden`/`--layers` (weights of a few hundred MB) is served beside the
bundled one (pinned). Each round: the first request loads it (cold), the model idles past its
`keep_alive` and unloads, the next request loads it again; then an explicit unload and load.
Printed: the load seconds (the core's histogram), the process RSS before, loaded and after each
unload, and the RSS given back against the weights' bytes. Then a long prompt on the bundled
model with `keep_alive: 0` (unloaded after each request): cold, then reloaded and served from
the disk tier, against a warm request on a model kept loaded. Not a test.

    .venv/bin/python tests/benchmarks/bench_model_lifecycle.py [--hidden 1024] [--layers 8]
        [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_responses.service.config import BUNDLED_MODEL

from tests.http.test_metrics import scrape, value
from tests.support.processes import free_port, process, wait_status
from tests.support.random_model import build_random_model

LONG_PROMPT = "The harbour town woke early. " * 200  # about 2,800 tokens
MIB = 1 << 20


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def create(base: str, model: str, **fields: Any) -> tuple[dict[str, Any], float]:
    body = {"model": model, "input": "Reply with: hi", "max_output_tokens": 4, **fields}
    started = time.perf_counter()
    reply = httpx.post(f"{base}/v1/responses", json=body, timeout=300)
    elapsed = time.perf_counter() - started
    if reply.status_code != 200:
        raise RuntimeError(reply.text)
    return reply.json(), elapsed


def metric(base: str, name: str, **labels: str) -> float:
    return value(scrape(f"{base}/metrics"), name, **labels)


def wait_unloaded(base: str, model: str, reason: str, count: int) -> None:
    deadline = time.monotonic() + 120
    while (
        metric(base, "mlx_responses_model_unloads_total", model_name=model, reason=reason) < count
    ):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{model} never unloaded ({reason})")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = build_random_model(
            Path(tmp) / "big-chat",
            hidden_size=args.hidden,
            layers=args.layers,
            intermediate_size=4 * args.hidden,
            heads=16,
            kv_heads=8,
            tokenizer_from=BUNDLED_MODEL,
        )
        http, tiny = free_port(), BUNDLED_MODEL.name
        with process(
            "serve", "--model", str(BUNDLED_MODEL), "--model", str(big), "--pin", tiny,
            "--keep-alive", "1s", "--prompt-cache-dir", str(Path(tmp) / "prompt-cache"),
            "--port", str(http), "--grpc-port", str(free_port()),
        ) as proc:  # fmt: skip
            wait_status(http, 200, proc)
            base = f"http://127.0.0.1:{http}"
            pid = proc.proc.pid
            idle = rss(pid)
            loaded_rss, after_rss, loads, explicit_loads = [], [], [], []
            weights = 0
            for n in range(1, args.rounds + 1):
                create(base, big.name)
                loaded_rss.append(rss(pid))
                listed = httpx.get(f"{base}/v1/models/{big.name}", timeout=10).json()
                weights = listed["memory_bytes"]
                wait_unloaded(base, big.name, "keep_alive", n)
                after_rss.append(rss(pid))
                started = time.perf_counter()
                url = f"{base}/v1/models/{big.name}"
                httpx.post(f"{url}/load", json={"keep_alive": -1}, timeout=300).raise_for_status()
                explicit_loads.append(time.perf_counter() - started)
                httpx.post(f"{url}/unload", timeout=60).raise_for_status()
            count = metric(base, "mlx_responses_model_load_seconds_count", model_name=big.name)
            total = metric(base, "mlx_responses_model_load_seconds_sum", model_name=big.name)
            loads.append(total / count)
            # The disk tier: unloaded after each request, the prompt's KV read back from disk.
            cold, cold_s = create(base, big.name, input=LONG_PROMPT, keep_alive=0)
            wait_unloaded(base, big.name, "keep_alive", args.rounds + 1)
            reloaded, reloaded_s = create(base, big.name, input=LONG_PROMPT, keep_alive=-1)
            warm, warm_s = create(base, big.name, input=LONG_PROMPT, keep_alive=-1)
        print(f"model: {big.name}, weights {weights / MIB:.0f} MiB ({args.layers} layers)")
        print(f"load seconds (core's histogram, mean of {int(count)}): {loads[0]:.2f} s")
        print(f"explicit POST .../load, median: {statistics.median(explicit_loads):.2f} s")
        given = [loaded - after for loaded, after in zip(loaded_rss, after_rss, strict=True)]
        print(
            f"RSS idle {idle / MIB:.0f} MiB, loaded {statistics.median(loaded_rss) / MIB:.0f} MiB, "
            f"after the keep-alive unload {statistics.median(after_rss) / MIB:.0f} MiB"
        )
        print(
            f"RSS given back per unload, median {statistics.median(given) / MIB:.0f} MiB = "
            f"{statistics.median(given) / weights:.2f}x the weights"
        )
        for label, reply, seconds in (
            ("cold (load + prefill)", cold, cold_s),
            ("reloaded, prompt from the disk tier", reloaded, reloaded_s),
            ("warm (loaded, prompt from memory)", warm, warm_s),
        ):
            usage = reply["usage"]
            print(
                f"{label}: {seconds:.2f} s, {usage['input_tokens_details']['cached_tokens']}"
                f"/{usage['input_tokens']} prompt tokens cached"
            )


if __name__ == "__main__":
    main()
