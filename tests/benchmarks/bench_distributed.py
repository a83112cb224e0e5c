"""A distributed group's cost on one machine (issue #40): tokens/s of 1 and 4 streams served by
one process and by a 2-rank ring group (tensor parallel), and the lockstep's own cost per step.

On one CPU machine two ranks share the same cores and memory, so the group is no faster: its
figure measures what splitting the model and stepping in lockstep cost, not a speed-up. The
engines alone (rank 0's engine fed requests directly, no server around it) are measured too,
one process and two ranks. The lockstep's share is measured apart (`--probe`, run as two
ranks): decode steps of the bundled model sharded over two ranks, with and without rank 0's
per-step message before each forward pass (the engine's `_next_commands` post/collect,
pipelined), alternated in rounds; goal: the message costs at most 5% of a step.

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


def serving(model: Path, tokens: int) -> tuple[dict[str, float], dict[str, float]]:
    """Tokens/s served by one process, by two ranks under mlx.launch and by two ranks started
    by hand (as mlx.launch would, without its relay of their output); and the cores each
    group's processes kept busy while the machine was idle (2 s after the group was up)."""
    figures: dict[str, float] = {}
    with one_process(model) as url:
        for streams in (1, 4):
            figures[f"1 rank, {streams} streams"] = tokens_per_second(url, streams, tokens)
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
            for streams in (1, 4):
                figures[f"{name}, {streams} streams"] = tokens_per_second(
                    group.url, streams, tokens
                )
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
def probe(steps: int, rounds: int) -> None:
    """One rank of the probe (run by `protocol_cost`): prints rank 0's step times as JSON."""
    import mlx.core as mx
    from mlx_lm.generate import generation_stream
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_responses.service.engine.distributed.channel import Channel
    from mlx_responses.service.engine.distributed.load import join_group, load_shard

    group = join_group()
    assert group is not None
    loaded = load_shard(BUNDLED_MODEL, "tiny-chat", "tensor", group)
    channel = Channel(group)
    message = b""  # most steps' message: no command (the engine sends b"" then)

    def decode(with_message: bool) -> float:
        cache = make_prompt_cache(loaded.model)
        with mx.stream(generation_stream):
            y = mx.array([[1, 2, 3, 4, 5, 6, 7, 8]])
            mx.eval(loaded.model(y, cache=cache))
            y = mx.array([[9]])
            started = time.perf_counter()
            for _ in range(steps):
                if with_message:  # as the engine does (lockstep.py): pipelined
                    if channel.rank == 0:
                        channel.post(message, generation_stream)
                    else:
                        channel.collect(generation_stream)
                logits = loaded.model(y, cache=cache)
                y = mx.argmax(logits[:, -1:, :], axis=-1)
                mx.eval(y)
            if with_message and channel.rank == 0:
                channel.wait()
            return (time.perf_counter() - started) / steps

    decode(False)
    decode(True)  # warm both
    plain, sent = [], []
    for _ in range(rounds):
        plain.append(decode(False))
        sent.append(decode(True))
    if group.rank() == 0:
        print(json.dumps({"plain": plain, "sent": sent}), flush=True)


def protocol_cost(steps: int, rounds: int) -> dict[str, float]:
    """Runs the probe as two ranks (ring on 127.0.0.1, as mlx.launch would start them)."""
    with tempfile.TemporaryDirectory() as folder:
        hostfile = Path(folder) / "hosts.json"
        hostfile.write_text(json.dumps([[f"127.0.0.1:{free_port()}"] for _ in range(2)]))
        procs = []
        for rank in range(2):
            env = {**os.environ, "MLX_RANK": str(rank), "MLX_HOSTFILE": str(hostfile)}
            command = [sys.executable, __file__, "--probe", str(steps), str(rounds)]
            procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=600)[0] for p in procs]
    times = json.loads(outputs[0].strip().splitlines()[-1])
    plain, sent = statistics.median(times["plain"]), statistics.median(times["sent"])
    quiet = min(times["sent"]) / min(times["plain"]) - 1  # the least disturbed rounds
    return {
        "step_ms": plain * 1000,
        "step_with_message_ms": sent * 1000,
        "share": sent / plain - 1,
        "share_of_fastest": quiet,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=200, help="tokens per request")
    parser.add_argument("--steps", type=int, default=200, help="decode steps per probe round")
    parser.add_argument("--rounds", type=int, default=7, help="probe rounds (alternated)")
    parser.add_argument("--served", action="store_true", help="only the figures served over HTTP")
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
        cost = protocol_cost(args.steps, args.rounds)
        verdict = "met" if cost["share_of_fastest"] <= GOAL else "MISSED"
        print(
            f"lockstep message per step (bundled model, 2 ranks, tensor): step "
            f"{cost['step_ms']:.3f} ms, with the message {cost['step_with_message_ms']:.3f} ms "
            f"(medians: {cost['share'] * 100:+.1f}%); fastest rounds "
            f"{cost['share_of_fastest'] * 100:+.1f}% (goal <= {GOAL * 100:.0f}%: {verdict})"
        )
    print(f"machine load (1 min): {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        model = tiny_shaped(Path(folder) / "random")
        alone = {} if args.served else engines_alone(model, args.tokens)
        figures, idle = serving(model, args.tokens)
    for name, cores in idle.items():
        print(f"idle, cores busy: {name}: {cores:.2f}")
    for title, measured in (("engines alone", alone), ("served over HTTP", figures)):
        if not measured:
            continue
        for name, value in measured.items():
            print(f"{title}: {name}: {value:.1f} tokens/s")
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
