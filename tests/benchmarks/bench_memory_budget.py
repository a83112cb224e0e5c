"""Peak memory of a burst of long prompts, with `--memory-limit` and without (issue #39).

A random model of 8 layers and 4 KiB of KV a token; `serve` with `--memory-limit` set to 768 MiB
above its weights, then the same server without a limit; each takes 32 concurrent requests of
4k-token prompts. Prints the server's peak resident memory (VmHWM, its descendants included)
against the limit (the goal: at most the limit + 10%), whether the process lived, and what each
request got: completed, or a clean 503 with Retry-After (anything else is counted as a failure).
Not a test.

    .venv/bin/python tests/benchmarks/bench_memory_budget.py [--requests 32] [--prompt-tokens 4096]
        [--max-tokens 64] [--headroom-mib 768]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.processes import Process, free_port, wait_status  # noqa: E402
from tests.support.random_model import build_random_model  # noqa: E402

MIB = 1 << 20
# 8 layers x (K, V) x 2 KV heads x 32 x float32 = 4 KiB of KV a token.
SHAPE: dict[str, Any] = {"hidden_size": 128, "layers": 8, "heads": 4, "kv_heads": 2}


def weights_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _status_kib(pid: int, field: str) -> int:
    total = 0
    for p in _descendants(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith(field):
                    total += int(line.split()[1])
    return total


class Sampler(threading.Thread):
    """Samples the server's RSS every 50 ms (its peak also comes from VmHWM at the end)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            self.peak = max(self.peak, _status_kib(self.pid, "VmRSS:") * 1024)


def prompts(folder: Path, n: int, tokens: int, seed: int = 0) -> list[str]:
    """`n` different prompts of about `tokens` tokens each (random words of the vocabulary)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    vocab = [w for w in tokenizer.get_vocab() if w.isalpha() and len(w) > 2]
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [f"Request {i}."]
        while len(tokenizer.encode(" ".join(words)).ids) < tokens - 64:
            words += rng.choices(vocab, k=256)
        text = " ".join(words)
        ids = tokenizer.encode(text).ids[: tokens - 64]
        out.append(tokenizer.decode(ids))
    return out


async def one(client: httpx.AsyncClient, base: str, prompt: str, max_tokens: int) -> str:
    """What one request got: "completed", "503" (with Retry-After), or what went wrong."""
    try:
        r = await client.post(
            f"{base}/v1/completions",
            json={"model": "random", "prompt": prompt, "max_tokens": max_tokens},
        )
    except httpx.HTTPError as exc:
        return f"transport: {type(exc).__name__}"
    if r.status_code == 200:
        return "completed" if r.json()["usage"]["completion_tokens"] == max_tokens else "short"
    if r.status_code == 503 and r.headers.get("retry-after"):
        return "503"
    return f"{r.status_code}: {r.text[:200]}"


async def burst(base: str, texts: list[str], max_tokens: int) -> Counter[str]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800.0, connect=10.0)) as client:
        results = await asyncio.gather(*(one(client, base, t, max_tokens) for t in texts))
    return Counter(results)


def run(folder: Path, limit: int | None, texts: list[str], max_tokens: int) -> dict[str, Any]:
    port, grpc_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as cache_dir:
        args = [
            "serve",
            "--model",
            str(folder),
            "--model-alias",
            "random",
            "--port",
            str(port),
            "--grpc-port",
            str(grpc_port),
            "--prompt-cache-dir",
            cache_dir,
        ]
        if limit is not None:
            args += ["--memory-limit", str(limit)]
        server = Process(*args)
        try:
            wait_status(port, 200, server, timeout=180)
            idle = _status_kib(server.proc.pid, "VmRSS:") * 1024
            sampler = Sampler(server.proc.pid)
            sampler.start()
            started = time.perf_counter()
            outcome = asyncio.run(burst(f"http://127.0.0.1:{port}", texts, max_tokens))
            seconds = time.perf_counter() - started
            sampler.done.set()
            hwm = _status_kib(server.proc.pid, "VmHWM:") * 1024
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
            alive = server.alive()
            log = server.output()
        finally:
            server.stop()
    return {
        "idle": idle,
        "peak": max(hwm, sampler.peak),
        "alive": alive,
        "outcome": outcome,
        "seconds": seconds,
        "log": log,
        "waits": _metric(metrics, "mlx_responses_admission_waits_total"),
        "wait_seconds": _metric(metrics, "mlx_responses_admission_wait_seconds_total"),
    }


def _metric(text: str, name: str) -> float:
    """The sum of a metric's samples in a Prometheus exposition."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=4096)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--headroom-mib", type=int, default=768)
    parser.add_argument("--only", choices=("limit", "none"), default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    try:
        folder = build_random_model(
            work / "random", **SHAPE, context=args.prompt_tokens + 4096, intermediate_size=256
        )
        weights = weights_bytes(folder)
        limit = weights + args.headroom_mib * MIB
        texts = prompts(folder, args.requests, args.prompt_tokens)
        print(
            f"model: 8 layers, 4 KiB KV/token, weights {weights / MIB:.1f} MiB; "
            f"{args.requests} requests x {args.prompt_tokens} prompt tokens, "
            f"max_tokens {args.max_tokens}; limit {limit / MIB:.0f} MiB",
            flush=True,
        )
        figures: dict[str, dict[str, Any]] = {}
        for name, value in (("limit", limit), ("none", None)):
            if args.only not in (None, name):
                continue
            result = figures[name] = run(folder, value, texts, args.max_tokens)
            ok = set(result["outcome"]) <= {"completed", "503"}
            print(
                f"{name:>5}: peak RSS {result['peak'] / MIB:,.0f} MiB "
                f"({result['peak'] / limit:.2f}x the limit; idle {result['idle'] / MIB:,.0f} MiB), "
                f"alive={result['alive']}, {dict(result['outcome'])} in {result['seconds']:.1f}s, "
                f"{result['waits']:.0f} waited for memory ({result['wait_seconds']:.0f}s in all)"
                f"{'' if ok else '  <-- unclean outcomes'}",
                flush=True,
            )
            if not result["alive"] or not ok:
                print(result["log"][-3000:])
        if "limit" in figures:
            peak = figures["limit"]["peak"]
            goal = "met" if peak <= 1.1 * limit else "MISSED"
            print(f"goal peak <= limit + 10% ({1.1 * limit / MIB:,.0f} MiB): {goal}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
