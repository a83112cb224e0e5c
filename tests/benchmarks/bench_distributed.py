"""A distributed group's cost on one machine (issue #40): tokens/s of 1 and 4 streams served by
one process and by a 2-rank ring group (tensor parallel), and the lockstep's own cost per step.

On one CPU machine two ranks share the same cores and memory, so the group is no faster: its
figure measures what splitting the model and stepping in lockstep cost, not a speed-up. The
engines alone (rank 0's engine fed requests directly, no server around it) are measured too,
one process and two ranks. The lockstep's share is measured apart (`--probe-only` for it
alone; run as two ranks): decode steps of the bundled model sharded over two ranks, without
rank 0's message, with it before every step's forward pass (the engine's post/collect,
pipelined), and with it every AMORTIZE steps, in many short rounds whose blocks run in a
balanced order (A B C C B A, so that a drift of the machine's load weighs on each alike); the
share of each is the median of its per-round ratios to the plain step, with a 95% bootstrap
interval; the time each rank spends posting / collecting a message is printed too. Goal: the
message costs at most 5% of a step (the interval's top end at most 5%).

The group is served twice: under `mlx.launch` (the documented way) and with its ranks started
by hand as mlx.launch would (MLX_RANK, MLX_HOSTFILE), without the launcher's relay of their
output; the cores each group's processes keep busy while idle are printed too (on this machine
the launcher's relay threads poll without blocking, and a rank waiting in a `ring` collective
spins). `--served`: only the served figures.

    PYTHONPATH=$PWD .venv/bin/python tests/benchmarks/bench_distributed.py [--tokens 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from mlx_responses.service.config import BUNDLED_MODEL  # noqa: E402

from tests.support.group import Group, _children, by_hand, launched  # noqa: E402
from tests.support.processes import free_port, process, wait_status  # noqa: E402
from tests.support.random_model import build_random_model  # noqa: E402

GOAL = 0.05  # the per-step message's share of a step, at most
AMORTIZE = 8  # the probe's "amortized" condition: one message every this many steps


def tiny_shaped(folder: Path) -> Path:
    """A random model of the bundled model's shape that never stops (tokens/s need long
    answers; the bundled model answers in a word)."""
    if not (folder / "config.json").is_file():
        build_random_model(
            folder, hidden_size=192, layers=3, intermediate_size=512, heads=4, kv_heads=4
        )
    return folder


@contextmanager
def one_process(model: Path) -> Iterator[str]:
    port = free_port()
    args = ["serve", "--model", str(model), "--port", str(port), "--grpc-port", str(free_port())]
    with process(*args, "--no-prompt-cache-disk") as proc:
        wait_status(port, 200, proc)
        yield f"http://127.0.0.1:{port}"


def tokens_per_second(url: str, streams: int, tokens: int) -> float:
    """`streams` streamed requests at once, each of `tokens` greedy tokens: tokens/s in all."""
    counts: list[int] = []

    def one(i: int) -> None:
        body = {
            "model": "random",
            "input": f"Write about topic {i}",
            "max_output_tokens": tokens,
            "temperature": 0,
            "stream": True,
        }
        with httpx.stream("POST", f"{url}/v1/responses", json=body, timeout=600) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: ") and '"usage"' in line:
                    event = json.loads(line[6:])
                    if event["type"] in ("response.completed", "response.incomplete"):
                        counts.append(event["response"]["usage"]["output_tokens"])

    one(99)  # warm: compiled paths, caches
    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of all of `pid`'s threads so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rank_of(pid: int) -> str:
    """A rank's number, from the MLX_RANK its launcher set."""
    for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        if item.startswith(b"MLX_RANK="):
            return item[9:].decode()
    return "?"


def _ranks(group: Group, under_launcher: bool) -> list[int]:
    return _children(group.procs[0].pid) if under_launcher else [p.pid for p in group.procs]


def _rates(url: str, name: str, tokens: int, repeat: int, into: dict[str, list[float]]) -> None:
    """Tokens/s at 1 and 4 streams, `repeat` times alternated (1, 4, 1, 4, ...)."""
    for _ in range(repeat):
        for streams in (1, 4):
            into.setdefault(f"{name}, {streams} streams", []).append(
                tokens_per_second(url, streams, tokens)
            )


def serving(
    model: Path, tokens: int, repeat: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Tokens/s served by one process, by two ranks under mlx.launch and by two ranks started
    by hand (as mlx.launch would, without its relay of their output), each measured `repeat`
    times; and the cores each group's processes kept busy while the machine was idle (2 s
    after the group was up)."""
    figures: dict[str, list[float]] = {}
    with one_process(model) as url:
        _rates(url, "1 rank", tokens, repeat, figures)
    idle: dict[str, float] = {}
    for name, start in (("2 ranks", launched), ("2 ranks by hand", by_hand)):
        with start(model, "tensor") as group:
            pids = {f"rank {rank_of(pid)}": pid for pid in _ranks(group, start is launched)}
            if start is launched:
                pids["mlx.launch"] = group.procs[0].pid
            before = {label: cpu_seconds(pid) for label, pid in pids.items()}
            time.sleep(2)
            for label, pid in sorted(pids.items()):
                idle[f"{name}: {label}"] = (cpu_seconds(pid) - before[label]) / 2
            _rates(group.url, name, tokens, repeat, figures)
    return figures, idle


# --- the engines alone: no server around them ---------------------------------------------
async def _engines(model: Path, tokens: int) -> None:
    """One rank of `engines_alone` (or the one process): rank 0's engine fed requests directly
    (1 stream, then 4), the others following; rank 0 prints tokens/s as JSON."""
    import asyncio

    from mlx_responses.service.config import Settings
    from mlx_responses.service.engine.distributed.channel import Channel
    from mlx_responses.service.engine.distributed.load import join_group
    from mlx_responses.service.engine.distributed.lockstep import Leader
    from mlx_responses.service.engine.model import load_model
    from mlx_responses.service.engine.requests import SamplingParams
    from mlx_responses.service.models.distributed import ShardLoad, group_settings, run_follower
    from mlx_responses.service.models.pool import engine_worker

    group = join_group()
    settings = Settings(models=(model,), distributed="tensor" if group else "auto")
    if group is None:
        worker = engine_worker(settings, "m", lambda: load_model(model))
    else:
        settings = group_settings(settings)
        if group.rank() != 0:
            await run_follower(settings, group, engine_worker, asyncio.Event())
            return
        leader = Leader(Channel(group), settings.distributed_timeout)
        worker = engine_worker(settings, "m", ShardLoad(settings, "m", leader, group), leader)
        leader.attach(worker)
    await worker.start()

    async def one(i: int) -> int:
        stream = worker.submit([1, 2, 3, 4 + i], SamplingParams(tokens, temperature=0))
        return sum([c.tokens async for chunks in stream.batches() for c in chunks])

    await one(99)  # warm
    figures = {}
    for streams in (1, 4):
        started = time.perf_counter()
        done = await asyncio.gather(*(one(i) for i in range(streams)))
        figures[streams] = sum(done) / (time.perf_counter() - started)
    print(json.dumps(figures), flush=True)
    worker.stop()


def engines_alone(model: Path, tokens: int) -> dict[str, float]:
    """Tokens/s of the engines without their servers: one process, then two ranks."""
    figures: dict[str, float] = {}
    for ranks in (1, 2):
        with tempfile.TemporaryDirectory() as folder:
            hostfile = Path(folder) / "hosts.json"
            hostfile.write_text(json.dumps([[f"127.0.0.1:{free_port()}"] for _ in range(2)]))
            procs = []
            for rank in range(ranks):
                env = dict(os.environ)
                if ranks > 1:
                    env |= {"MLX_RANK": str(rank), "MLX_HOSTFILE": str(hostfile)}
                command = [sys.executable, __file__, "--engines", str(model), str(tokens)]
                procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True))
            outputs = [p.communicate(timeout=600)[0] for p in procs]
        measured = json.loads(outputs[0].strip().splitlines()[-1])
        for streams, value in measured.items():
            figures[f"{ranks} rank{'s' if ranks > 1 else ''}, {streams} streams"] = value
    return figures


# --- the probe: two ranks stepping the bundled model ---------------------------------------
# Each round runs the conditions in a balanced order (A B C C B A: a drift over the round
# weighs on each alike), every block the same decode steps from the same prompt; the figures
# are per-round paired ratios against the plain step, their median and a bootstrap interval.
CONDITIONS = ("plain", "every step", "amortized")


def probe(steps: int, rounds: int) -> None:
    """One rank of the probe (run by `protocol_cost`): prints rank 0's block times, and the
    time each rank spent posting / collecting the message, as JSON."""
    import mlx.core as mx
    from mlx_lm.generate import generation_stream
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_responses.service.engine.distributed.channel import HEADER_BYTES, Channel
    from mlx_responses.service.engine.distributed.load import join_group, load_shard

    group = join_group()
    assert group is not None
    loaded = load_shard(BUNDLED_MODEL, "tiny-chat", "tensor", group)
    channel = Channel(group)
    message = b""  # most steps' message: no command (the engine sends b"" then)
    spent = {name: 0.0 for name in CONDITIONS}  # in post / collect
    messages = {name: 0 for name in CONDITIONS}

    def decode(condition: str) -> float:
        every = {"plain": 0, "every step": 1, "amortized": AMORTIZE}[condition]
        cache = make_prompt_cache(loaded.model)
        with mx.stream(generation_stream):
            y = mx.array([[1, 2, 3, 4, 5, 6, 7, 8]])
            mx.eval(loaded.model(y, cache=cache))
            y = mx.array([[9]])
            started = time.perf_counter()
            for step in range(steps):
                if every and step % every == 0:  # as the engine does (lockstep.py): pipelined
                    posted = time.perf_counter()
                    if channel.rank == 0:
                        channel.post(message, generation_stream)
                    else:
                        channel.collect(generation_stream)
                    spent[condition] += time.perf_counter() - posted
                    messages[condition] += 1
                logits = loaded.model(y, cache=cache)
                y = mx.argmax(logits[:, -1:, :], axis=-1)
                mx.eval(y)
            if every and channel.rank == 0:
                channel.wait()
            return time.perf_counter() - started

    order = [*CONDITIONS, *reversed(CONDITIONS)]
    for name in order:  # warm every path
        decode(name)
    spent = {name: 0.0 for name in CONDITIONS}
    messages = {name: 0 for name in CONDITIONS}
    blocks: list[dict[str, float]] = []
    for _ in range(rounds):
        times = {name: 0.0 for name in CONDITIONS}
        for name in order:
            times[name] += decode(name)
        blocks.append(times)
    report = {
        "blocks": blocks,
        "spent": spent,
        "messages": messages,
        "header_bytes": HEADER_BYTES,
        "rank": group.rank(),
    }
    print(json.dumps(report), flush=True)


def _interval(shares: list[float], draws: int = 4000) -> tuple[float, float]:
    """A 95% bootstrap interval of the median of `shares` (percentiles of resampled medians)."""
    import numpy as np

    values = np.asarray(shares)
    picks = np.random.default_rng(0).integers(0, len(values), (draws, len(values)))
    medians = np.median(values[picks], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def protocol_cost(steps: int, rounds: int) -> dict[str, dict[str, float]]:
    """Runs the probe as two ranks (ring on 127.0.0.1, as mlx.launch would start them); per
    condition: its step (ms, median over rounds), its share over the plain step paired by round
    (median and 95% interval), and the time each rank spent posting / collecting per message."""
    with tempfile.TemporaryDirectory() as folder:
        hostfile = Path(folder) / "hosts.json"
        hostfile.write_text(json.dumps([[f"127.0.0.1:{free_port()}"] for _ in range(2)]))
        procs = []
        for rank in range(2):
            env = {**os.environ, "MLX_RANK": str(rank), "MLX_HOSTFILE": str(hostfile)}
            command = [sys.executable, __file__, "--probe", str(steps), str(rounds)]
            procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=600)[0] for p in procs]
    reports = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    blocks = reports[0]["blocks"]
    figures: dict[str, dict[str, float]] = {}
    for name in CONDITIONS:
        shares = [b[name] / b["plain"] - 1 for b in blocks]
        low, high = _interval(shares)
        sent = max(reports[0]["messages"][name], 1)
        figures[name] = {
            "step_ms": statistics.median(b[name] for b in blocks) / (2 * steps) * 1000,
            "share": statistics.median(shares),
            "low": low,
            "high": high,
            "messages_per_step": reports[0]["messages"][name] / (2 * steps * rounds),
            "post_us": reports[0]["spent"][name] / sent * 1e6,
            "collect_us": reports[1]["spent"][name] / sent * 1e6,
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=200, help="tokens per request")
    parser.add_argument("--steps", type=int, default=40, help="decode steps per probe block")
    parser.add_argument("--rounds", type=int, default=180, help="probe rounds (A B C C B A)")
    parser.add_argument("--probe-only", action="store_true", help="only the lockstep probe")
    parser.add_argument("--served", action="store_true", help="only the figures served over HTTP")
    parser.add_argument("--repeat", type=int, default=3, help="served measurements per figure")
    parser.add_argument("--probe", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--engines", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe(*args.probe)
        return
    if args.engines:
        import asyncio

        asyncio.run(_engines(Path(args.engines[0]), int(args.engines[1])))
        return
    if not args.served:
        print(f"machine load (1 min) before the probe: {os.getloadavg()[0]:.1f}")
        cost = protocol_cost(args.steps, args.rounds)
        plain = cost["plain"]["step_ms"]
        print(f"lockstep probe (bundled model, 2 ranks, tensor): plain step {plain:.3f} ms")
        for name in CONDITIONS[1:]:
            c = cost[name]
            verdict = "met" if c["high"] <= GOAL else "not shown"
            print(
                f"  message {name} ({c['messages_per_step']:.3f} per step): step "
                f"{c['step_ms']:.3f} ms, {c['share'] * 100:+.1f}% of a step, 95% interval "
                f"{c['low'] * 100:+.1f}%..{c['high'] * 100:+.1f}% (goal <= {GOAL * 100:.0f}%: "
                f"{verdict}); posting {c['post_us']:.0f} us, collecting {c['collect_us']:.0f} us "
                "per message"
            )
        if args.probe_only:
            return
    print(f"machine load (1 min): {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        model = tiny_shaped(Path(folder) / "random")
        alone = {} if args.served else engines_alone(model, args.tokens)
        served, idle = serving(model, args.tokens, args.repeat)
    figures = {name: statistics.median(values) for name, values in served.items()}
    print(f"machine load (1 min) after serving: {os.getloadavg()[0]:.1f}")
    for name, cores in idle.items():
        print(f"idle, cores busy: {name}: {cores:.2f}")
    for title, measured in (("engines alone", alone), ("served over HTTP", figures)):
        if not measured:
            continue
        for name, value in measured.items():
            spread = served.get(name) if measured is figures else None
            among = f" (median of {min(spread):.0f}..{max(spread):.0f})" if spread else ""
            print(f"{title}: {name}: {value:.1f} tokens/s{among}")
        for streams in (1, 4):
            for group in ("2 ranks", "2 ranks by hand"):
                if f"{group}, {streams} streams" not in measured:
                    continue
                ratio = (
                    measured[f"{group}, {streams} streams"] / measured[f"1 rank, {streams} streams"]
                )
                print(
                    f"{title}: {streams} streams: {group} / 1 rank = {ratio:.2f} "
                    "(one machine: a cost)"
                )


if __name__ == "__main__":
    main()
