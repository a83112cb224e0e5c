"""Peak memory of a burst of long prompts, with `--memory-limit` and without (issues #39, #51).

A random qwen3 of 8 layers and 4 KiB of KV a token (hidden 128, one KV head of 64 in float32);
`serve` with `--memory-limit` set to 768 MiB above its weights, then (`--only none`) the same
server without a limit; each takes 32 concurrent requests of 4k-token prompts. Prints the
server's peak resident memory (VmHWM, its descendants included) against the limit (the goal: at
most the limit + 10%), what the budget counted at that moment (/metrics: the account's bytes by
kind, MLX's active and cached bytes), whether the process lived, and what each request got:
completed, or a clean 503 with Retry-After (anything else is counted as a failure).

`--sweep` runs every cell of APIs (responses, chat, completions, messages) x `--batch-sizes`
x disk tier on/off x `--lengths`, with the limit only, and prints one line a cell. Not a test.

    .venv/bin/python tests/benchmarks/bench_memory_budget.py [--requests 32] [--prompt-tokens 4096]
        [--max-tokens 64] [--headroom-mib 768] [--api responses] [--batch-size 16] [--no-disk]
    .venv/bin/python tests/benchmarks/bench_memory_budget.py --sweep --max-tokens 16 \
        [--apis responses,chat] [--batch-sizes 8,32] [--lengths 1024,4096,16384] \
        [--requests-by-length 16384:8] [--engine batch]
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
# 8 layers x (K, V) x 1 KV head x 64 x float32 = 4 KiB of KV a token.
SHAPE: dict[str, Any] = {"hidden_size": 128, "layers": 8, "heads": 2, "kv_heads": 1}
CONTEXT = 16_384
APIS = ("responses", "chat", "completions", "messages")


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
    """Samples the server's RSS every 50 ms (its peak also comes from VmHWM at the end), and
    the budget's view (/metrics) every 250 ms: what it counted nearest the peak."""

    def __init__(self, pid: int, base: str) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.base = base
        self.peak = 0
        self.at_peak: dict[str, float] = {}
        self.counted_peak = 0.0  # the most the account counted at any sample
        self.done = threading.Event()

    def run(self) -> None:
        last = 0.0
        with httpx.Client(timeout=5) as client:
            while not self.done.wait(0.05):
                rss = _status_kib(self.pid, "VmRSS:") * 1024
                if rss > self.peak or time.monotonic() - last > 0.25:
                    last = time.monotonic()
                    view = _budget_view(client, self.base)
                    self.counted_peak = max(self.counted_peak, view.get("counted", 0.0))
                    if rss > self.peak:
                        self.peak, self.at_peak = rss, {"rss": rss, **view}


def _budget_view(client: httpx.Client, base: str) -> dict[str, float]:
    """The account's bytes by kind, their sum, and MLX's active and cached bytes."""
    try:
        text = client.get(f"{base}/metrics").text
    except httpx.HTTPError:
        return {}
    view: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("mlx_responses_memory_bytes{"):
            kind = line.split('kind="', 1)[1].split('"', 1)[0]
            view[kind] = view.get(kind, 0.0) + float(line.rsplit(" ", 1)[1])
        for name in ("mlx_active_memory_bytes", "mlx_cache_memory_bytes"):
            if line.startswith(f"mlx_responses_{name} "):
                view[name] = float(line.rsplit(" ", 1)[1])
    kinds = ("weights", "kv", "prompt_cache", "image_cache", "runtime")
    view["counted"] = sum(view.get(k, 0.0) for k in kinds)
    return view


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


def _request(api: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
    """The path and body of one request of `api`."""
    message = [{"role": "user", "content": prompt}]
    if api == "responses":
        return "/v1/responses", {"input": prompt, "max_output_tokens": max_tokens}
    if api == "chat":
        return "/v1/chat/completions", {"messages": message, "max_tokens": max_tokens}
    if api == "messages":
        return "/v1/messages", {"messages": message, "max_tokens": max_tokens}
    return "/v1/completions", {"prompt": prompt, "max_tokens": max_tokens}


def _generated(api: str, body: dict[str, Any]) -> int:
    usage = body["usage"]
    return int(
        usage["output_tokens"] if api in ("responses", "messages") else usage["completion_tokens"]
    )


async def one(
    client: httpx.AsyncClient, base: str, prompt: str, max_tokens: int, api: str = "completions"
) -> str:
    """What one request got: "completed", "503" (with Retry-After), or what went wrong."""
    path, body = _request(api, prompt, max_tokens)
    try:
        r = await client.post(f"{base}{path}", json={"model": "random", **body})
    except httpx.HTTPError as exc:
        return f"transport: {type(exc).__name__}"
    if r.status_code == 200:
        return "completed" if _generated(api, r.json()) == max_tokens else "short"
    if r.status_code == 503 and r.headers.get("retry-after"):
        return "503"
    return f"{r.status_code}: {r.text[:200]}"


async def burst(base: str, texts: list[str], max_tokens: int, api: str) -> Counter[str]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800.0, connect=10.0)) as client:
        results = await asyncio.gather(*(one(client, base, t, max_tokens, api) for t in texts))
    return Counter(results)


def run(
    folder: Path,
    limit: int | None,
    texts: list[str],
    max_tokens: int,
    *,
    api: str = "completions",
    batch_size: int | None = None,
    disk: bool = True,
    engine: str | None = None,
) -> dict[str, Any]:
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
        ]
        args += ["--prompt-cache-dir", cache_dir] if disk else ["--no-prompt-cache-disk"]
        if batch_size is not None:
            args += ["--max-batch-size", str(batch_size)]
        if limit is not None:
            args += ["--memory-limit", str(limit)]
        if engine is not None:
            args += ["--engine", engine]
        server = Process(*args)
        try:
            wait_status(port, 200, server, timeout=180)
            idle = _status_kib(server.proc.pid, "VmRSS:") * 1024
            base = f"http://127.0.0.1:{port}"
            sampler = Sampler(server.proc.pid, base)
            sampler.start()
            started = time.perf_counter()
            outcome = asyncio.run(burst(base, texts, max_tokens, api))
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
        "at_peak": sampler.at_peak,
        "counted_peak": sampler.counted_peak,
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


def _line(name: str, result: dict[str, Any], limit: int | None) -> str:
    """One cell: peak RSS against the limit, and what the budget counted at the peak."""
    peak, at = result["peak"], result["at_peak"]
    ratio = f" ({peak / limit:.2f}x the limit)" if limit else ""
    counted = at.get("counted", 0.0)
    parts = ", ".join(
        f"{k} {at[k] / MIB:,.0f}"
        for k in (
            "weights",
            "kv",
            "prompt_cache",
            "runtime",
            "mlx_active_memory_bytes",
            "mlx_cache_memory_bytes",
        )
        if k in at
    )
    ok = set(result["outcome"]) <= {"completed", "503"}
    return (
        f"{name}: peak RSS {peak / MIB:,.0f} MiB{ratio}, idle {result['idle'] / MIB:,.0f}; "
        f"counted at the peak {counted / MIB:,.0f} MiB ({parts}), uncounted "
        f"{(at.get('rss', peak) - counted) / MIB:,.0f} MiB; alive={result['alive']}, "
        f"{dict(result['outcome'])} in {result['seconds']:.1f}s, {result['waits']:.0f} waited"
        f"{'' if ok else '  <-- unclean outcomes'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=4096)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--headroom-mib", type=int, default=768)
    parser.add_argument("--only", choices=("limit", "none"), default=None)
    parser.add_argument("--api", choices=APIS, default="completions")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--no-disk", action="store_true")
    parser.add_argument(
        "--engine",
        choices=("slots", "batch"),
        default=None,
        help="the server's --engine (default: its auto, slots on a CPU, batch on a GPU)",
    )
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--apis", default=",".join(APIS))
    parser.add_argument("--batch-sizes", default="8,32")
    parser.add_argument("--lengths", default="1024,4096,16384")
    parser.add_argument("--disks", default="on,off")
    parser.add_argument(
        "--requests-by-length",
        default="",
        help="requests per prompt length in the sweep, e.g. 16384:8 (past what the budget "
        "admits at once; the rest: --requests)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    try:
        folder = build_random_model(
            work / "random", **SHAPE, context=CONTEXT, intermediate_size=256
        )
        weights = weights_bytes(folder)
        limit = weights + args.headroom_mib * MIB
        print(
            f"model: qwen3, 8 layers, 4 KiB KV/token, weights {weights / MIB:.1f} MiB, context "
            f"{CONTEXT:,}; {args.requests} requests, max_tokens {args.max_tokens}; limit "
            f"{limit / MIB:.0f} MiB (goal: peak <= {1.1 * limit / MIB:,.0f} MiB); engine "
            f"{args.engine or 'auto'}",
            flush=True,
        )
        if args.sweep:
            missed = 0
            table: list[str] = []
            by_length = dict(
                (int(k), int(v))
                for k, v in (pair.split(":") for pair in args.requests_by_length.split(",") if pair)
            )
            for length in (int(n) for n in args.lengths.split(",")):
                texts = prompts(folder, by_length.get(length, args.requests), length)
                for api in args.apis.split(","):
                    for batch in (int(b) for b in args.batch_sizes.split(",")):
                        for disk in args.disks.split(","):
                            result = run(
                                folder,
                                limit,
                                texts,
                                args.max_tokens,
                                api=api,
                                batch_size=batch,
                                disk=disk == "on",
                                engine=args.engine,
                            )
                            missed += result["peak"] > 1.1 * limit or not result["alive"]
                            cell = f"{api:>11} batch {batch:>2} disk {disk:>3} {length:>6} tok"
                            print(_line(cell, result, limit), flush=True)
                            table.append(
                                f"| {api} | {batch} | {disk} | {length:,} x {len(texts)} | "
                                f"{result['peak'] / MIB:,.0f} | {result['peak'] / limit:.2f} | "
                                f"{'yes' if result['alive'] else 'KILLED'} |"
                            )
            print("| API | batch | disk | tokens x requests | peak RSS MiB | / limit | alive |")
            print("|---|---|---|---|---|---|---|")
            print("\n".join(table))
            print(f"cells over limit + 10% or killed: {missed}")
            return
        texts = prompts(folder, args.requests, args.prompt_tokens)
        figures: dict[str, dict[str, Any]] = {}
        for name, value in (("limit", limit), ("none", None)):
            if args.only not in (None, name):
                continue
            result = figures[name] = run(
                folder,
                value,
                texts,
                args.max_tokens,
                api=args.api,
                batch_size=args.batch_size,
                disk=not args.no_disk,
                engine=args.engine,
            )
            print(_line(f"{name:>5}", result, value), flush=True)
            if not result["alive"] or not set(result["outcome"]) <= {"completed", "503"}:
                print(result["log"][-3000:])
        if "limit" in figures:
            peak = figures["limit"]["peak"]
            goal = "met" if peak <= 1.1 * limit else "MISSED"
            print(f"goal peak <= limit + 10% ({1.1 * limit / MIB:,.0f} MiB): {goal}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
