"""A soak of a real `serve` process: mixed APIs for some minutes, then what it held.

Two random models are served: `main` (pinned) takes the steady traffic, `side` a burst at the
start of each minute with `keep_alive: 5s`, so it unloads and reloads once a minute. The
prompt cache's disk tier is bounded small and fed distinct long prompts, so it fills past its
bound and evicts throughout. Worker threads loop over: Responses (plain, streamed, background
polled to its end, background cancelled, a stream dropped after its first event), Chat
Completions (streamed), Completions and Anthropic Messages; a shared prefix on half the prompts
keeps the memory tier and the disk tier serving hits.

The response store grows by design with `store: true`: every response the soak makes is
deleted once it ended (background ones after their end is polled, a dropped stream's once it
is found ended), so the store and the background event logs stay near empty and what RSS shows
is the server's own; the store is also bounded (`stored` responses) for what a delete misses.

The process's RSS and open files are sampled every `SAMPLE_EVERY` seconds. After the warm-up,
the samples are split in thirds: "flat" compares the median of the last third with the first
third's (windows, not single samples: the side model's weights come and go each minute).
`tests/benchmarks/soak.py` runs it for 30 minutes; `tests/e2e/test_soak.py` for 2.
"""

from __future__ import annotations

import itertools
import json
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.http.test_metrics import scrape, value
from tests.support.processes import free_port, process, wait_status
from tests.support.random_model import build_random_model

MIB = 1 << 20
PREFIX = "You are a careful assistant for the harbour office. " * 30  # ~300 shared tokens
FILLER = "The boats went out past the breakwater before dawn. "
SAMPLE_EVERY = 5.0
# Byte gauges of the core sampled beside RSS (what holds memory), summed over their labels.
GAUGES = ("mlx_responses_mlx_active_memory_bytes", "mlx_responses_mlx_cache_memory_bytes",
          "mlx_responses_store_bytes", "mlx_responses_prompt_cache_bytes")  # fmt: skip
TERMINAL = ("completed", "incomplete", "failed", "cancelled")
Call = Callable[[], tuple[int, str, str]]


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def open_files(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def disk_bytes(folder: Path) -> int:
    """Bytes of the files under `folder` (the server writes and evicts meanwhile)."""
    total = 0
    for path in folder.rglob("*"):
        try:
            total += path.stat().st_size if path.is_file() else 0
        except FileNotFoundError:
            continue
    return total


@dataclass(frozen=True)
class Options:
    minutes: float = 30.0
    workers: int = 6
    disk_mib: int = 16  # the disk tier's bound
    timeout: float = 120.0  # a request's seconds: longer is "stuck"
    stored: int = 128  # responses the store keeps
    warm_up: float = 5.0  # minutes left out of the "flat" judgement
    cache_entries: int = 32  # the prompt cache's memory tier (the server's default)


class Driver:
    """The client side: its HTTP client, its tallies and the prompts it makes."""

    def __init__(self, base: str, main: str, timeout: float) -> None:
        self.base, self.main, self.timeout = base, main, timeout
        self.client = httpx.Client(base_url=base, timeout=timeout)
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.server_errors: list[str] = []
        self.stuck: list[str] = []
        self.undeleted: list[str] = []  # stored responses whose delete failed
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

    def run(self, kind: str, call: Call) -> None:
        try:
            status, outcome, detail = call()
        except httpx.TimeoutException:
            with self._lock:
                self.stuck.append(kind)
            return
        self.note(kind, status, outcome, detail)

    def delete(self, response_id: str) -> None:
        """Deletes a stored response once it ended (polls a running one to its end first)."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            got = self.client.get(f"/v1/responses/{response_id}")
            if got.status_code >= 500:
                self.note("delete", got.status_code, "get", got.text)
                return
            if got.status_code != 200 or got.json()["status"] in TERMINAL:
                break
            time.sleep(0.2)
        gone = self.client.delete(f"/v1/responses/{response_id}")
        if gone.status_code >= 500:
            self.note("delete", gone.status_code, "delete", gone.text)
        elif gone.status_code not in (200, 404):  # 404: not stored (a stream dropped early)
            with self._lock:
                self.undeleted.append(f"{response_id}: {gone.status_code}")

    # --- the request kinds ---------------------------------------------------------------------
    def responses(self, model: str | None = None, **extra: Any) -> tuple[int, str, str]:
        body = {"model": model or self.main, "input": self.prompt(), "max_output_tokens": 16}
        reply = self.client.post("/v1/responses", json={**body, **extra})
        if reply.status_code != 200:
            return reply.status_code, "", reply.text
        self.delete(reply.json()["id"])
        return reply.status_code, reply.json().get("status", ""), reply.text

    def responses_stream(self, drop: bool = False) -> tuple[int, str, str]:
        body = {"model": self.main, "input": self.prompt(), "max_output_tokens": 16}
        response_id = ""
        with self.client.stream("POST", "/v1/responses", json={**body, "stream": True}) as r:
            if r.status_code != 200:
                return r.status_code, "", r.read().decode(errors="replace")
            last = ""
            for line in r.iter_lines():
                if line.startswith("event: "):
                    last = line[7:]
                elif line.startswith("data: ") and not response_id:
                    response_id = _response_id(line[6:])
                    if drop:
                        break
        if response_id:
            self.delete(response_id)
        return r.status_code, "dropped" if drop else last, ""

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
                self.delete(rid)
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

    def kinds(self) -> list[tuple[str, Call]]:
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


def _response_id(data: str) -> str:
    """The response id of a Responses stream's first event (response.created)."""
    event = json.loads(data)
    return str(event.get("response", {}).get("id", ""))


@dataclass
class Sample:
    seconds: float
    rss: int
    open_files: int
    disk_bytes: int
    gauges: dict[str, float]


@dataclass
class Flat:
    """A quantity after the warm-up: the medians of its first and last thirds, its peak."""

    label: str
    early: float
    late: float
    peak: float

    @property
    def ratio(self) -> float:
        return self.late / self.early if self.early else 1.0


@dataclass
class Result:
    options: Options
    driver: Driver
    samples: list[Sample]
    side_unloads: float
    side_loads: float
    kinds: list[str] = field(default_factory=list)

    @property
    def after(self) -> list[Sample]:
        return [s for s in self.samples if s.seconds >= self.options.warm_up * 60]

    def flat(self, label: str, read: Callable[[Sample], float]) -> Flat | None:
        after = self.after
        if len(after) < 3:
            return None
        third = max(1, len(after) // 3)
        return Flat(
            label,
            statistics.median(read(s) for s in after[:third]),
            statistics.median(read(s) for s in after[-third:]),
            max(read(s) for s in after),
        )

    @property
    def rss(self) -> Flat | None:
        return self.flat("RSS (MiB)", lambda s: s.rss / MIB)

    @property
    def open_files(self) -> Flat | None:
        return self.flat("open files", lambda s: s.open_files)

    def failures(self) -> list[str]:
        """What breaks the soak's promises: 5xx, stuck requests, a kind that never succeeded,
        the side model never reloaded, the disk tier never filled, RSS or open files not flat
        within 10%."""
        d = self.driver
        found = [f"5xx: {line}" for line in d.server_errors]
        found += [f"stuck: {kind}" for kind in d.stuck]
        served = {kind for (kind, outcome), _ in d.outcomes.items() if outcome.startswith("200")}
        found += [f"never served: {kind}" for kind in self.kinds if kind not in served]
        if self.side_unloads < 1 or self.side_loads < 1:
            found.append(
                f"side model: {self.side_unloads:.0f} unloads, {self.side_loads:.0f} loads"
            )
        peak = max((s.disk_bytes for s in self.samples), default=0)
        if peak < 0.75 * self.options.disk_mib * MIB:  # what the soak means to drive
            found.append(f"the disk tier never filled: peak {peak / MIB:.1f} MiB on disk")
        for flat in (self.rss, self.open_files):
            if flat is None:
                found.append("too few samples after the warm-up")
            elif flat.ratio > 1.1:
                found.append(f"{flat.label} not flat: {flat.early:.0f} -> {flat.late:.0f}")
        return found

    def lines(self) -> list[str]:
        d, o = self.driver, self.options
        out = [f"soak: {o.minutes:g} min, {o.workers} workers, {sum(d.outcomes.values())} requests"]
        for (kind, outcome), count in sorted(d.outcomes.items()):
            out.append(f"  {kind:<26} {outcome:<22} {count:>6}")
        out.append(
            f"side model: {self.side_unloads:.0f} keep_alive unloads, "
            f"{self.side_loads:.0f} loads on a request"
        )
        out.append(
            f"5xx: {len(d.server_errors)}; stuck (> {o.timeout:g}s): {len(d.stuck)}; "
            f"responses not deleted: {len(d.undeleted)}"
        )
        out += [f"  {line}" for line in d.server_errors[:5]]
        if self.samples:
            first = self.samples[0]
            out.append(f"first sample ({first.seconds:.0f}s): RSS {first.rss / MIB:.0f} MiB, "
                       f"{first.open_files} open files")  # fmt: skip
        for flat in (self.rss, self.open_files):
            if flat is not None:
                out.append(
                    f"{flat.label} after {o.warm_up:g} min warm-up, medians of the first and "
                    f"last thirds: {flat.early:.0f} -> {flat.late:.0f} ({flat.ratio:.3f}x); "
                    f"peak {flat.peak:.0f} (the side model loaded)"
                )
        for g in GAUGES:
            flat = self.flat(g, lambda s, g=g: s.gauges.get(g, 0.0) / MIB)
            if flat is not None:
                out.append(f"  {g}: {flat.early:.1f} -> {flat.late:.1f} MiB")
        out += self.windows()
        if self.samples:
            peak = max(s.disk_bytes for s in self.samples) / MIB
            out.append(f"disk tier: peak {peak:.1f} MiB on disk (bound {o.disk_mib} MiB)")
        return out

    def windows(self, minutes: float = 5.0) -> list[str]:
        """RSS's median in each window of `minutes` (a run of 10 minutes or more)."""
        if not self.samples or self.samples[-1].seconds < 600:
            return []
        span = minutes * 60
        by: dict[int, list[int]] = {}
        for s in self.samples:
            by.setdefault(int(s.seconds // span), []).append(s.rss)
        medians = [f"{statistics.median(v) / MIB:.0f}" for _, v in sorted(by.items())]
        return [f"RSS median by {minutes:g}-minute window (MiB): {' '.join(medians)}"]


def run(options: Options) -> Result:
    """Builds the two models, serves them and soaks the server for `options.minutes`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        main_model = build_random_model(root / "main", hidden_size=128, layers=4, seed=1)
        side_model = build_random_model(root / "side", hidden_size=64, layers=2, seed=2)
        disk = root / "prompt-cache"
        http = free_port()
        with process(
            "serve", "--model", str(main_model), "--model", str(side_model), "--pin", "main",
            "--prompt-cache-dir", str(disk),
            "--prompt-cache-disk-bytes", str(options.disk_mib * MIB),
            "--port", str(http), "--grpc-port", str(free_port()),
            "--responses-store-max-entries", str(options.stored),
            "--prompt-cache-max-entries", str(options.cache_entries),
        ) as proc:  # fmt: skip
            wait_status(http, 200, proc)
            return soak(proc.proc.pid, f"http://127.0.0.1:{http}", options, disk)


def soak(pid: int, base: str, options: Options, disk: Path) -> Result:
    driver = Driver(base, "main", options.timeout)
    kinds = driver.kinds()
    end = time.monotonic() + options.minutes * 60
    samples: list[Sample] = []
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
            time.sleep(max(0.0, min(60 - (time.monotonic() - minute), end - time.monotonic())))

    with ThreadPoolExecutor(options.workers + 1) as pool:
        futures = [pool.submit(worker, i) for i in range(options.workers)]
        futures.append(pool.submit(side_bursts))
        while not all(f.done() for f in futures):
            scraped = scrape(f"{base}/metrics")
            samples.append(
                Sample(
                    time.monotonic() - started,
                    rss(pid),
                    open_files(pid),
                    disk_bytes(disk),
                    {g: sum(v for (n, _), v in scraped.items() if n == g) for g in GAUGES},
                )
            )
            time.sleep(SAMPLE_EVERY)
        for f in futures:
            f.result()
    metrics = scrape(f"{base}/metrics")
    return Result(
        options,
        driver,
        samples,
        value(metrics, "mlx_responses_model_unloads_total", model_name="side", reason="keep_alive"),
        value(metrics, "mlx_responses_model_loads_total", model_name="side", reason="request"),
        kinds=[kind for kind, _ in kinds] + ["side (keep_alive 5s)"],
    )
