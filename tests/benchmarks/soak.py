"""A soak of a real `serve` process: mixed APIs for `--minutes`, then what it held.

Two random models are served: `main` (pinned) takes the steady traffic, `side` a burst at the
start of each minute with `keep_alive: 5s`, so it unloads and reloads once a minute. The
prompt cache's disk tier is bounded small (`--disk-mib`) and fed distinct long prompts, so it
fills past its bound and evicts throughout; the response store keeps `--stored` responses (full
within the warm-up). `--workers` threads loop over: Responses (plain,
streamed, background polled to its end, background cancelled, a stream dropped after its first
event), Chat Completions (streamed), Completions and Anthropic Messages; a shared prefix on half
the prompts keeps the memory tier and the disk tier serving hits.

Checked and printed: no 5xx, no stuck request (each has `--timeout` seconds), every request's
outcome by kind, the side model's unloads and loads, and the process's RSS and open files
sampled every 5 s: after the warm-up (the first fifth of the run, at least a minute when there
is one), the median of the last third of the samples against the first third's: within 10%
(the largest is printed too: it includes the side model's weights while loaded). Not a test: at a
2-minute run, the warm-up leaves too few samples to say "flat" apart from noise, and its minutes
of wall time are more than the suite's budget gives one check; run it by hand or nightly.

    .venv/bin/python tests/benchmarks/soak.py [--minutes 30] [--workers 6] [--disk-mib 16]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


from tests.http.test_metrics import scrape, value
from tests.support.processes import free_port, process, wait_status
from tests.support.random_model import build_random_model

MIB = 1 << 20
PREFIX = "You are a careful assistant for the harbour office. " * 30  # ~300 shared tokens
FILLER = "The boats went out past the breakwater before dawn. "
SAMPLE_EVERY = 5.0
# Byte gauges of the core sampled beside RSS (what holds memory), by name and label filter.
GAUGES = ("mlx_responses_mlx_active_memory_bytes", "mlx_responses_mlx_cache_memory_bytes",
          "mlx_responses_store_bytes", "mlx_responses_prompt_cache_bytes")  # fmt: skip
TERMINAL = ("completed", "incomplete", "failed", "cancelled")


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def open_files(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


class Soak:
    """The driver: its client, its tallies and the prompts it makes."""

    def __init__(self, base: str, main: str, timeout: float) -> None:
        self.base, self.main, self.timeout = base, main, timeout
        self.client = httpx.Client(base_url=base, timeout=timeout)
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.server_errors: list[str] = []
        self.stuck: list[str] = []
        self._n = itertools.count()
        self._lock = threading.Lock()

    def prompt(self) -> str:
        n = next(self._n)
        body = f"Request {n}: " + FILLER * (10 + n % 30)
        return PREFIX + body if n % 2 else body

    def note(self, kind: str, status: int, outcome: str, detail: str = "") -> None:
        with self._lock:
            self.outcomes[(kind, f"{status} {outcome}")] += 1
            if status >= 500:
                self.server_errors.append(f"{kind}: {status} {detail[:300]}")

    def run(self, kind: str, call: Callable[[], tuple[int, str, str]]) -> None:
        try:
            status, outcome, detail = call()
        except httpx.TimeoutException:
            with self._lock:
                self.stuck.append(kind)
            return
        self.note(kind, status, outcome, detail)

    # --- the request kinds ---------------------------------------------------------------------
    def responses(self, model: str | None = None, **extra: Any) -> tuple[int, str, str]:
        body = {"model": model or self.main, "input": self.prompt(), "max_output_tokens": 16}
        reply = self.client.post("/v1/responses", json={**body, **extra})
        status = reply.json().get("status", "") if reply.status_code == 200 else ""
        return reply.status_code, status, reply.text

    def responses_stream(self, drop: bool = False) -> tuple[int, str, str]:
        body = {"model": self.main, "input": self.prompt(), "max_output_tokens": 16}
        with self.client.stream("POST", "/v1/responses", json={**body, "stream": True}) as r:
            if r.status_code != 200:
                return r.status_code, "", r.read().decode(errors="replace")
            last = ""
            for line in r.iter_lines():
                if line.startswith("event: "):
                    last = line[7:]
                    if drop:
                        return r.status_code, "dropped", ""
            return r.status_code, last, ""

    def background(self, cancel: bool) -> tuple[int, str, str]:
        body = {"model": self.main, "input": self.prompt(), "max_output_tokens": 64}
        reply = self.client.post("/v1/responses", json={**body, "background": True})
        if reply.status_code != 200:
            return reply.status_code, "", reply.text
        rid = reply.json()["id"]
        if cancel:
            cancelled = self.client.post(f"/v1/responses/{rid}/cancel")
            if cancelled.status_code >= 500:
                return cancelled.status_code, "cancel", cancelled.text
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            got = self.client.get(f"/v1/responses/{rid}")
            if got.status_code != 200:
                return got.status_code, "poll", got.text
            if (status := got.json()["status"]) in TERMINAL:
                return 200, status, ""
            time.sleep(0.2)
        raise httpx.TimeoutException("background response never ended")

    def chat_stream(self) -> tuple[int, str, str]:
        body = {
            "model": self.main,
            "messages": [{"role": "user", "content": self.prompt()}],
            "max_tokens": 16,
            "stream": True,
        }
        with self.client.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                return r.status_code, "", r.read().decode(errors="replace")
            done = any(line == "data: [DONE]" for line in r.iter_lines())
            return r.status_code, "done" if done else "cut", ""

    def completions(self) -> tuple[int, str, str]:
        body = {"model": self.main, "prompt": self.prompt(), "max_tokens": 16}
        reply = self.client.post("/v1/completions", json=body)
        reason = reply.json()["choices"][0]["finish_reason"] if reply.status_code == 200 else ""
        return reply.status_code, str(reason), reply.text

    def messages(self) -> tuple[int, str, str]:
        body = {
            "model": self.main,
            "max_tokens": 16,
            "messages": [{"role": "user", "content": self.prompt()}],
        }
        reply = self.client.post("/v1/messages", json=body)
        reason = reply.json().get("stop_reason", "") if reply.status_code == 200 else ""
        return reply.status_code, str(reason), reply.text

    def kinds(self) -> list[tuple[str, Callable[[], tuple[int, str, str]]]]:
        return [
            ("responses", self.responses),
            ("responses stream", self.responses_stream),
            ("responses stream dropped", lambda: self.responses_stream(drop=True)),
            ("background", lambda: self.background(cancel=False)),
            ("background cancelled", lambda: self.background(cancel=True)),
            ("chat stream", self.chat_stream),
            ("completions", self.completions),
            ("messages", self.messages),
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--disk-mib", type=int, default=16, help="the disk tier's bound")
    parser.add_argument("--timeout", type=float, default=120.0, help="a request's seconds")
    parser.add_argument("--stored", type=int, default=128, help="responses the store keeps")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        main_model = build_random_model(root / "main", hidden_size=128, layers=4, seed=1)
        side_model = build_random_model(root / "side", hidden_size=64, layers=2, seed=2)
        disk = root / "prompt-cache"
        http = free_port()
        with process(
            "serve", "--model", str(main_model), "--model", str(side_model), "--pin", "main",
            "--prompt-cache-dir", str(disk), "--prompt-cache-disk-bytes", str(args.disk_mib * MIB),
            "--port", str(http), "--grpc-port", str(free_port()),
            # Bounded so that the response store is full within the warm-up: its default (1,024
            # responses kept an hour) still fills through a 15-minute run, which reads as growth.
            "--responses-store-max-entries", str(args.stored),
        ) as proc:  # fmt: skip
            wait_status(http, 200, proc)
            report(soak(proc.proc.pid, f"http://127.0.0.1:{http}", args, disk), args)


def soak(pid: int, base: str, args: argparse.Namespace, disk: Path) -> dict[str, Any]:
    driver = Soak(base, "main", args.timeout)
    kinds = driver.kinds()
    end = time.monotonic() + args.minutes * 60
    samples: list[tuple[float, int, int, int]] = []  # (seconds, rss, open files, disk bytes)
    gauges: list[dict[str, float]] = []  # GAUGES at each sample, summed over their labels
    started = time.monotonic()

    def worker(index: int) -> None:
        for n in itertools.count(index):
            if time.monotonic() >= end:
                return
            kind, call = kinds[n % len(kinds)]
            driver.run(kind, call)

    def side_bursts() -> None:
        while time.monotonic() < end:
            minute = time.monotonic()
            for _ in range(3):
                driver.run(
                    "side (keep_alive 5s)", lambda: driver.responses("side", keep_alive="5s")
                )
            time.sleep(max(0.0, 60 - (time.monotonic() - minute)))

    with ThreadPoolExecutor(args.workers + 1) as pool:
        futures = [pool.submit(worker, i) for i in range(args.workers)]
        futures.append(pool.submit(side_bursts))
        while not all(f.done() for f in futures):
            disk_bytes = sum(p.stat().st_size for p in disk.rglob("*") if p.is_file())
            samples.append((time.monotonic() - started, rss(pid), open_files(pid), disk_bytes))
            scraped = scrape(f"{base}/metrics")
            gauges.append({g: sum(v for (n, _), v in scraped.items() if n == g) for g in GAUGES})
            time.sleep(SAMPLE_EVERY)
        for f in futures:
            f.result()
    metrics = scrape(f"{base}/metrics")
    return {
        "driver": driver,
        "samples": samples,
        "gauges": gauges,
        "side_unloads": value(
            metrics, "mlx_responses_model_unloads_total", model_name="side", reason="keep_alive"
        ),
        "side_loads": value(
            metrics, "mlx_responses_model_loads_total", model_name="side", reason="request"
        ),
    }


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    driver: Soak = result["driver"]
    samples: list[tuple[float, int, int, int]] = result["samples"]
    total = sum(driver.outcomes.values())
    print(f"soak: {args.minutes:g} min, {args.workers} workers, {total} requests")
    for (kind, outcome), count in sorted(driver.outcomes.items()):
        print(f"  {kind:<26} {outcome:<22} {count:>6}")
    print(f"side model: {result['side_unloads']:.0f} keep_alive unloads, "
          f"{result['side_loads']:.0f} loads on a request")  # fmt: skip
    print(f"5xx: {len(driver.server_errors)}; stuck (> {args.timeout:g}s): {len(driver.stuck)}")
    for line in driver.server_errors[:5]:
        print(f"  {line}")
    warm_up = min(max(60.0, samples[-1][0] / 5), samples[-1][0] * 0.5) if samples else 0
    after = [s for s in samples if s[0] >= warm_up]
    failed = bool(driver.server_errors or driver.stuck)
    if len(after) >= 3:
        third = max(1, len(after) // 3)
        for label, i, unit in (("RSS", 1, MIB), ("open files", 2, 1)):
            early = statistics.median(s[i] for s in after[:third])
            late = statistics.median(s[i] for s in after[-third:])
            peak = max(s[i] for s in after)
            print(
                f"{label} after {warm_up:.0f}s warm-up, median of the first and last thirds: "
                f"{early / unit:.0f} -> {late / unit:.0f} ({late / early:.3f}x); peak "
                f"{peak / unit:.0f} ({peak / early:.3f}x: the side model loaded)"
            )
            failed |= late > 1.1 * early
        kept = result["gauges"][len(samples) - len(after) :]
        for g in GAUGES:
            early = statistics.median(x[g] for x in kept[:third])
            late = statistics.median(x[g] for x in kept[-third:])
            print(f"  {g}: {early / MIB:.1f} -> {late / MIB:.1f} MiB")
        print(
            f"disk tier: peak {max(s[3] for s in samples) / MIB:.1f} MiB on disk "
            f"(bound {args.disk_mib} MiB)"
        )
    print(json.dumps({"ok": not failed}))
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
