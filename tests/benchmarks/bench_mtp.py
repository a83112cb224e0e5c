"""A checkpoint's own MTP head, served: our server drafting with it vs. not drafting
(--speculative off), and vs. `mlx_vlm.server --draft-model <same folder> --draft-kind mtp`, all
on one checkpoint in one run (by default the trained tiny Qwen3.5, service/assets/tiny-qwen35-mtp).

The requests are the trained model's held-out conversations that ask it to think in words
(tiny-chat's "think_request" ones, `training.tiny_chat.data.eval_prompts("think")`: phrasings
such as "Think hard, then reply with: W." and words from the eval pools, never trained on,
after 0 to 3 earlier text turns; those with tool turns are left out): what it was trained to
answer at some length, "<think>\nThe user wants W.\n</think>\n\nW", about 12 tokens. Its
echo answers (one word, one token) have no decode to measure. Each request is streamed.
Decode tok/s is aggregated over the requests of a contender: their tokens after the first over
their first-to-last-token times, so short answers weigh by their length. Contenders alternate
request by request (no contender always first). Figures, each with its goal:
- one stream, greedy: with the head vs. without drafting (goal >= 1.5x);
- one stream, temperature 0.7: with vs. without (goal >= 1.3x);
- --streams streams at once, greedy (aggregate decode tok/s): with vs. without (goal >= 1.0x);
- one stream, greedy: ours with the head vs. mlx_vlm.server with it (goal >= 1.0x).
Each server runs in its own process; the load average is printed beside the figures, and
each contender's server CPU milliseconds per generated token (all its threads and processes,
prefill included: a steadier figure than wall time on a shared machine). The
passes (`--repeats`, 3) run back to back in the same servers: each figure is the median of the
passes' ratios (a shared machine's bursts fall on one pass).

    flock /tmp/bench.lock python tests/benchmarks/bench_mtp.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
sys.path.insert(0, str(REPO))

from bench_serving import (  # noqa: E402
    BIN,
    HTTP_TIMEOUT,
    StreamResult,
    cpu_seconds,
    free_port,
    load_average,
    run_concurrent,
    server_process,
    stream_mlx_lm,
    stream_ours,
    wait_ours,
)

Messages = list[dict[str, str]]


def conversations(n: int) -> list[Messages]:
    """`n` of tiny-chat's held-out conversations that ask it to think first."""
    from training.tiny_chat.data import eval_prompts

    def plain(messages: Messages) -> bool:  # text turns alone (no tool turns in the history)
        return all(set(m) == {"role", "content"} and m["role"] != "tool" for m in messages)

    found = [p.messages for p in eval_prompts("think", 8 * n) if p.variant == "think_request"]
    return [m for m in found if plain(m)][:n]


def ours(alias: str, messages: Messages, tokens: int, temperature: float) -> dict[str, Any]:
    return {
        "model": alias,
        "input": messages,
        "stream": True,
        "max_output_tokens": tokens,
        "temperature": temperature,
    }


def theirs(model: Path, messages: Messages, tokens: int, temperature: float) -> dict[str, Any]:
    return {
        "model": str(model),
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": tokens,
        "temperature": temperature,
    }


def one(kind: str, base: str, body: dict[str, Any], timeout: float) -> StreamResult:
    """One streamed request."""

    async def go() -> StreamResult:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
            fn = stream_ours if kind == "ours" else stream_mlx_lm
            return await asyncio.wait_for(fn(client, base, body), timeout)

    return asyncio.run(go())


def wait_vlm(proc: Any, port: int, folder: Path, timeout: float) -> None:
    """Until mlx_vlm.server answers a one-token chat completion (it names its model)."""
    deadline = time.monotonic() + timeout
    body = theirs(folder, [{"role": "user", "content": "hi"}], 1, 0.0) | {"stream": False}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlx_vlm.server exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            if httpx.post(url, json=body, timeout=30).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError("mlx_vlm.server never answered")


class Tally:
    """A contender's streamed requests: tokens after the first, and their decode seconds; its
    server's CPU seconds over the requests (prefill, façade and all: steadier than wall time on
    a shared machine) and their tokens."""

    def __init__(self) -> None:
        self.tokens = 0
        self.seconds = 0.0
        self.requests = 0
        self.cpu = 0.0
        self.generated = 0

    def add(self, result: StreamResult, cpu: float) -> None:
        self.requests += 1
        self.cpu += cpu
        self.generated += result.tokens
        if result.first is not None and result.last is not None and result.tokens > 1:
            self.tokens += result.tokens - 1
            self.seconds += result.last - result.first

    @property
    def cpu_ms(self) -> float:
        """The server's CPU milliseconds per generated token."""
        return 1e3 * self.cpu / self.generated if self.generated else float("nan")

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=REPO / "service/assets/tiny-qwen35-mtp")
    parser.add_argument("--requests", type=int, default=24, help="conversations per figure")
    parser.add_argument("--tokens", type=int, default=64, help="max output tokens each")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--num-draft-tokens", type=int, default=4)
    parser.add_argument("--no-mlx-vlm", action="store_true", help="skip mlx_vlm.server")
    parser.add_argument("--repeats", type=int, default=3, help="passes; medians reported")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    folder = args.model.resolve()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t, n, alias = args.timeout, args.streams, folder.name
    chats = conversations(args.requests)

    def serve(http: int, *flags: str) -> list[str]:
        return [
            str(BIN / "mlx-responses"),
            "serve",
            "--model",
            str(folder),
            "--port",
            str(http),
            "--grpc-port",
            str(free_port()),
            "--max-batch-size",
            str(max(8, n)),
            "--num-draft-tokens",
            str(args.num_draft_tokens),
            "--no-prompt-cache-disk",
            *flags,
        ]

    ports = {"mtp": free_port(), "off": free_port(), "mlx_vlm": free_port()}
    base = {k: f"http://127.0.0.1:{p}" for k, p in ports.items()}
    tallies: dict[str, Tally] = {}
    passes: list[dict[str, Tally]] = [{} for _ in range(args.repeats)]
    rep = 0  # the pass being measured

    def tally(name: str) -> Tally:
        passes[rep].setdefault(name, Tally())
        return tallies.setdefault(name, Tally())

    def add(name: str, result: StreamResult, cpu: float) -> None:
        tally(name).add(result, cpu)
        passes[rep][name].add(result, cpu)

    def timed(name: str, pid: int, kind: str, url: str, body: dict[str, Any]) -> None:
        """One streamed request, with its server's CPU seconds."""
        before = cpu_seconds(pid)
        result = one(kind, url, body, t)
        add(name, result, cpu_seconds(pid) - before)

    started = time.strftime("%H:%M")
    load_before = load_average()
    with (
        server_process("mtp", serve(ports["mtp"]), env) as mtp,
        server_process("off", serve(ports["off"], "--speculative", "off"), env) as off,
    ):
        wait_ours(mtp, ports["mtp"], t)
        wait_ours(off, ports["off"], t)
        for which in ("mtp", "off"):  # warm: the first requests build what later ones reuse
            one("ours", base[which], ours(alias, chats[0], 8, 0.0), t)
        for rep in range(args.repeats):
            for temperature, label in ((0.0, "greedy"), (0.7, "t07")):
                for i, chat in enumerate(chats):
                    order = ("mtp", "off") if (i + rep) % 2 == 0 else ("off", "mtp")
                    for which in order:
                        body = ours(alias, chat, args.tokens, temperature)
                        pid = (mtp if which == "mtp" else off).pid
                        timed(f"{which}.{label}.1", pid, "ours", base[which], body)
            for r in range(max(1, args.requests // n)):
                group = [chats[(r * n + i) % len(chats)] for i in range(n)]
                for which in ("mtp", "off") if (r + rep) % 2 == 0 else ("off", "mtp"):
                    bodies = [ours(alias, chat, args.tokens, 0.0) for chat in group]
                    pid = (mtp if which == "mtp" else off).pid
                    run = asyncio.run(run_concurrent("ours", base[which], bodies, t, pid))
                    for agg in (tally(f"{which}.greedy.{n}"), passes[rep][f"{which}.greedy.{n}"]):
                        agg.tokens += sum(max(0, k - 1) for k in run.tokens)
                        agg.seconds += run.decode_window
                        agg.requests += len(bodies)
                        agg.cpu += run.server_cpu
                        agg.generated += sum(run.tokens)
    if not args.no_mlx_vlm:
        vlm_argv = [
            sys.executable,
            "-m",
            "mlx_vlm.server",
            "--model",
            str(folder),
            "--draft-model",
            str(folder),
            "--draft-kind",
            "mtp",
            "--port",
            str(ports["mlx_vlm"]),
            "--host",
            "127.0.0.1",
        ]
        with (
            server_process("mtp", serve(ports["mtp"]), env) as mtp,
            server_process("mlx_vlm", vlm_argv, env) as vlm,
        ):
            wait_ours(mtp, ports["mtp"], t)
            wait_vlm(vlm, ports["mlx_vlm"], folder, t)
            one("ours", base["mtp"], ours(alias, chats[0], 8, 0.0), t)
            one("mlx_vlm", base["mlx_vlm"], theirs(folder, chats[0], 8, 0.0), t)
            for rep in range(args.repeats):
                for i, chat in enumerate(chats):
                    mine = ours(alias, chat, args.tokens, 0.0)
                    other = theirs(folder, chat, args.tokens, 0.0)
                    runs = [
                        ("side.ours", mtp.pid, "ours", base["mtp"], mine),
                        ("side.mlx_vlm", vlm.pid, "mlx_vlm", base["mlx_vlm"], other),
                    ]
                    for name, pid, kind, url, body in runs if (i + rep) % 2 == 0 else runs[::-1]:
                        timed(name, pid, kind, url, body)

    def median(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    rates = {name: median([p[name].rate for p in passes if name in p]) for name in tallies}
    for name, tt in sorted(tallies.items()):
        print(
            f"  {name}: {tt.tokens} tokens in {tt.seconds:.2f}s over {tt.requests} requests, "
            f"server CPU {tt.cpu_ms:.2f} ms a token"
        )
    print(
        f"\nmodel {folder.name}, {len(chats)} conversations, <= {args.tokens} tokens each, "
        f"started {started}, load {load_before:.2f} before, {load_average():.2f} after"
    )
    rows = [
        ("1 stream greedy, MTP vs no drafting", "mtp.greedy.1", "off.greedy.1", 1.5),
        ("1 stream t=0.7, MTP vs no drafting", "mtp.t07.1", "off.t07.1", 1.3),
        (f"{n} streams greedy, MTP vs no drafting", f"mtp.greedy.{n}", f"off.greedy.{n}", 1.0),
    ]
    if not args.no_mlx_vlm:
        rows.append(("1 stream greedy, ours vs mlx_vlm.server", "side.ours", "side.mlx_vlm", 1.0))
    summary = []
    print(f"medians of {args.repeats} passes (each pass's ratio in brackets)")
    for label, a, b, goal in rows:
        each = [p[a].rate / p[b].rate for p in passes if a in p and b in p and p[b].rate > 0]
        ratio = median(each)
        verdict = "meets" if ratio >= goal else "MISSES"
        figures = f"{rates[a]:>8.1f} vs {rates[b]:>8.1f} tok/s {ratio:5.2f}x"
        spread = ", ".join(f"{r:.2f}" for r in each)
        cpu = f"CPU {tallies[a].cpu_ms:.2f} vs {tallies[b].cpu_ms:.2f} ms/token"
        print(f"{label:<44}{figures} ({verdict} {goal}x) [{spread}]; {cpu}")
        summary.append(f"{label.replace(' ', '_').replace(',', '')}={ratio:.2f}")
    print("bench: " + " ".join(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
