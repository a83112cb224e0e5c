"""What an arriving request costs the server: CPU per request per thread, and a burst's timeline.

Runs the real stack in this process (tests/support/stack.py: core, real gRPC, aiohttp façade, MLX
engine) on a random micro model, and drives it over HTTP from the main thread:

- `--modes`: sequential requests of one kind each (`ns`: `POST /v1/responses`, 1 output token;
  `s`: the same streamed; `tokens`: `/v1/responses/input_tokens`, rendered, not generated;
  `models`: `GET /v1/models`, the HTTP + gRPC floor); prints CPU ms per request of the stack's
  event loop and of every thread that used more than 0.05 ms.
- `--burst W`: rounds of W streamed 1-token requests sent together; prints, per round (with
  `--show`) and as medians, when they reached the engine, when its first tokens left it, and
  when the clients read them.

    .venv/bin/python tools/arrival_cost.py --modes models,ns,s --burst 8 --show
    py-spy record --threads -r 1000 --format raw -p PID   # while it runs, for a profile
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="models,ns,s", help="comma-separated (see above)")
    parser.add_argument("--requests", type=int, default=300, help="requests per mode")
    parser.add_argument("--burst", type=int, default=0, help="requests per burst (0: none)")
    parser.add_argument("--rounds", type=int, default=20, help="bursts")
    parser.add_argument("--show", action="store_true", help="print each burst's timeline")
    parser.add_argument("--model", type=Path, help="model folder (default: a random micro one)")
    return parser.parse_args(argv)


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each of this process's threads, by name (native ones by id)."""
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[names.get(tid, f"native-{tid}")] = (int(fields[11]) + int(fields[12])) / tick
    return out


class Driver:
    def __init__(self, base_url: str, alias: str) -> None:
        self.base_url = base_url
        self.alias = alias
        self.rng = random.Random(0)

    def text(self) -> str:
        return " ".join(self.rng.choices(WORDS, k=40)) + f" run{self.rng.randrange(1 << 30)}"

    def body(self, stream: bool) -> dict[str, Any]:
        return {
            "model": self.alias,
            "input": self.text(),
            "max_output_tokens": 1,
            "temperature": 0,
            "stream": stream,
        }

    async def sequential(self, mode: str, n: int) -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            for _ in range(n):
                if mode == "models":
                    request = session.get(f"{self.base_url}/v1/models")
                elif mode == "tokens":
                    body = {"model": self.alias, "input": self.text()}
                    request = session.post(f"{self.base_url}/v1/responses/input_tokens", json=body)
                else:
                    request = session.post(
                        f"{self.base_url}/v1/responses", json=self.body(mode == "s")
                    )
                async with request as response:
                    if response.status != 200:
                        raise RuntimeError(await response.text())
                    await response.read()

    async def one(self, session: Any, t0: float) -> float:
        """Seconds from t0 to this stream's first text delta."""
        first = None
        url = f"{self.base_url}/v1/responses"
        async with session.post(url, json=self.body(True)) as response:
            async for line in response.content:
                if first is None and b"output_text.delta" in line:
                    first = time.perf_counter() - t0
        if first is None:
            raise RuntimeError("no text delta")
        return first

    async def bursts(self, width: int, rounds: int, probe: Probe, show: bool) -> list[list[float]]:
        import aiohttp

        rows = []
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:
            for _ in range(3):  # connections open, engine warm
                start = time.perf_counter()
                await asyncio.gather(*(self.one(session, start) for _ in range(width)))
            for _ in range(rounds):
                probe.clear()
                t0 = time.perf_counter()
                firsts = await asyncio.gather(*(self.one(session, t0) for _ in range(width)))
                submits = sorted(1000 * (t - t0) for t in probe.submits)
                emits = [(round(1000 * (t - t0), 1), n) for t, n in probe.emits]
                rows.append([submits[0], submits[-1], emits[0][0], 1000 * max(firsts)])
                if show:
                    print(
                        "engine submits (ms)",
                        [round(s, 1) for s in submits],
                        "engine emits (ms, streams)",
                        emits,
                        "clients' first tokens (ms)",
                        sorted(round(1000 * f, 1) for f in firsts),
                    )
                await asyncio.sleep(0.02)
        return rows


class Probe:
    """Times of the engine's submits and first-token emits (the worker's methods wrapped)."""

    def __init__(self) -> None:
        from mlx_responses.service.engine import worker

        self.submits: list[float] = []
        self.emits: list[tuple[float, int]] = []
        submit, emit_all = worker.EngineWorker.submit, worker.EngineWorker._emit_all

        def timed_submit(engine: Any, *args: Any, **kwargs: Any) -> Any:
            self.submits.append(time.perf_counter())
            return submit(engine, *args, **kwargs)

        def timed_emit_all(engine: Any, items: list[Any]) -> None:
            self.emits.append((time.perf_counter(), len(items)))
            emit_all(engine, items)

        worker.EngineWorker.submit = timed_submit
        worker.EngineWorker._emit_all = timed_emit_all

    def clear(self) -> None:
        self.submits.clear()
        self.emits.clear()


async def _loop_cpu() -> float:
    return time.thread_time()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(REPO))
    from mlx_responses.service.engine.blas import preload_blas

    preload_blas()  # before mlx is imported, as the console script does
    from tests.support.random_model import build_random_model
    from tests.support.stack import Stack

    folder = args.model
    if folder is None:
        folder = build_random_model(Path(tempfile.mkdtemp(prefix="arrival-")) / "micro")
    probe = Probe()
    with Stack.running(folder) as stack:
        driver = Driver(stack.base_url, folder.name)
        asyncio.run(driver.sequential("ns", 10))
        asyncio.run(driver.sequential("s", 10))
        for mode in [m for m in args.modes.split(",") if m]:
            n = args.requests
            threads0, loop0 = thread_cpu(), stack.run(_loop_cpu())
            started = time.perf_counter()
            asyncio.run(driver.sequential(mode, n))
            wall = time.perf_counter() - started
            loop1, threads1 = stack.run(_loop_cpu()), thread_cpu()
            print(
                f"{mode}: event loop {1000 * (loop1 - loop0) / n:.2f} ms CPU per request, "
                f"{1000 * wall / n:.2f} ms wall per request ({n} requests)"
            )
            for name, seconds in sorted(threads1.items(), key=lambda kv: kv[0]):
                per = 1000 * (seconds - threads0.get(name, 0.0)) / n
                if per > 0.05:
                    print(f"    {name:28s} {per:.2f} ms CPU per request")
        if args.burst:
            rows = driver.bursts(args.burst, args.rounds, probe, args.show)
            table = asyncio.run(rows)
            med = [statistics.median(row[i] for row in table) for i in range(4)]
            print(
                f"bursts of {args.burst} ({args.rounds} rounds, medians): first reached the "
                f"engine at {med[0]:.1f} ms, last at {med[1]:.1f} ms; the engine's first token "
                f"left at {med[2]:.1f} ms; the last client read its first token at {med[3]:.1f} ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
