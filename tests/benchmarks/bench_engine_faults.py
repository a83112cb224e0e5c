"""Fault injection at each stage of the engine (service/engine/supervision.py), over HTTP.

A core and façade run in this process (tests/support/stack.py) on a random model with the
prompt cache's disk tier, mlx-lm's batch engine. Each round arms a one-shot failure at one
stage (in turn: admission, step, extract, cache write, disk read, and "give up": a failure under
a restart limit of 1, so the engine gives up and the model is unloaded and reloaded after its
back-off), sends `--concurrency` `/v1/responses` requests at once (distinct prompts of ~600
tokens, 16 output tokens: each misses the memory tier and reads the disk tier), then one more
request once they ended; `--rounds` rounds at each stage, one stage after another. Checked and
printed, by stage: every request ended (200, completed or failed with a message; for "give up"
a 503 naming the failure during the back-off is allowed), the request after each fault
completed, the fault fired, and the process's RSS after the stage's rounds against before them
(and at the end against after the warm-up): within 10%. Not a test.

Before and after are each read after `--settle` rounds without faults, enough to fill the prompt
cache's memory tier to its entry bound (`--prompt-cache-max-entries`, 32) from empty: a round
keeps `--concurrency` + 1 entries, so the default is ceil(32 / 9) + 1 = 5 rounds. The tier is the
one thing a fault changes by design: a failed step or extraction rebuilds it empty, a cache
write's failure rebuilds it too, while admission's and disk read's keep it. Read right after the
rounds, "after" would compare an emptied tier (tens of MiB of KV) with a full one; after the
settle both hold a full tier of the same prompts' shape, printed beside RSS, so what is left is
what the faults themselves left behind. Three rounds (27 entries) left the tier short of full.
MLX's buffer cache (freed buffers kept for reuse; unbounded here, as no --memory-limit is set)
is printed beside them too. Requests are sent with `store: false`: the responses store keeps
every stored response by design (up to 1,024), which over a stage's ~1,000 requests grew RSS
by 15-29 MiB whatever the stage (disk read, which fails nothing, 1.13x), as the soak deletes
its responses for the same reason. At the end, RSS is held against the first stage's settled
"before" (read the same way); the warm-up's, read without a settle, is printed for information
(one run: 242 MiB after the warm-up, 271 MiB once settled, with no fault in between).

    .venv/bin/python tests/benchmarks/bench_engine_faults.py [--rounds 100] [--concurrency 8]
        [--stages step extract ...] [--settle 5]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import logging
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_lm.generate import GenerationBatch
from mlx_responses.service.engine import worker as worker_module
from mlx_responses.service.engine.batch.scheduler import BatchScheduler
from mlx_responses.service.engine.prompt_cache.cache import PromptCache
from mlx_responses.service.engine.prompt_cache.disk import PromptDisk
from mlx_responses.service.engine.supervision import Restarts
from mlx_responses.service.flags import PROMPT_CACHE_MAX_ENTRIES

from tests.support.random_model import build_random_model
from tests.support.stack import Stack

TEXT = "The harbour town woke early and the boats went out past the breakwater. " * 15
DONE = ("completed", "incomplete")  # the random model ends at max_output_tokens
STAGES: dict[str, tuple[Any, str]] = {
    "admission": (worker_module, "look_up"),
    "step": (BatchScheduler, "step"),
    "extract": (GenerationBatch, "extract_cache"),
    "cache write": (PromptCache, "keep"),
    "disk read": (PromptDisk, "fetch"),
    "give up": (BatchScheduler, "step"),
}
MIB = 1 << 20
MEMORY_ENTRIES = PROMPT_CACHE_MAX_ENTRIES.default  # the memory tier's entry bound


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Fault:
    """A one-shot failure armed at one stage at a time; counts the failures it raised."""

    def __init__(self) -> None:
        self.armed: str | None = None
        self.fired = Counter[str]()
        self._originals: dict[str, Callable[..., Any]] = {}
        for stage, (owner, name) in STAGES.items():
            if stage == "give up":
                continue
            original = getattr(owner, name)
            setattr(owner, name, self._wrap(stage, original))

    def _wrap(self, stage: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            armed = self.armed
            if armed is not None and (armed == stage or (armed == "give up" and stage == "step")):
                self.armed = None
                self.fired[armed] += 1
                raise RuntimeError(f"injected {armed} failure")
            return original(*args, **kwargs)

        return wrapper


def respond(base: str, model: str, text: str) -> tuple[int, dict[str, Any]]:
    body = {"model": model, "input": text, "max_output_tokens": 16, "store": False}
    reply = httpx.post(f"{base}/v1/responses", json=body, timeout=300)
    return reply.status_code, reply.json()


def ended(status: int, body: dict[str, Any], stage: str) -> str:
    """How one request ended: "completed", "failed" (with a message) or "refused" (503 while a
    failed model backs off); anything else raises."""
    if status == 200 and body.get("status") in DONE:
        return "completed"
    if status == 200 and body.get("status") == "failed" and body["error"]["message"]:
        return "failed"
    if status == 503 and stage == "give up" and "failed repeatedly" in body["error"]["message"]:
        return "refused"
    raise RuntimeError(f"{stage}: a request ended {status} {body}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=100, help="rounds of each stage")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--stages", nargs="+", choices=list(STAGES), default=list(STAGES), help="in this order"
    )
    parser.add_argument(
        "--settle",
        type=int,
        default=None,
        help="rounds without faults before and after a stage (default: enough to fill the "
        "prompt cache's memory tier from empty)",
    )
    parser.add_argument("--warm-up", type=int, default=12, help="rounds without faults first")
    args = parser.parse_args()
    if args.settle is None:
        args.settle = -(-MEMORY_ENTRIES // (args.concurrency + 1)) + 1
    logging.disable(logging.CRITICAL)  # each fault logs its traceback: only the figures here
    with tempfile.TemporaryDirectory() as tmp:
        model_path = build_random_model(Path(tmp) / "random-chat", hidden_size=128, layers=4)
        stack = Stack(
            model_path,
            engine="batch",
            prompt_cache_dir=Path(tmp) / "prompt-cache",
            prompt_cache_disk_bytes=256 * MIB,
            no_prompt_cache_disk=False,
        )
        stack.start()
        try:
            run(stack, args)
        finally:
            stack.stop()


def run(stack: Stack, args: argparse.Namespace) -> None:
    assert stack.core is not None
    pool = stack.core.models
    pool.backoff = 0.5
    model = pool.default.id
    base = stack.base_url
    fault = Fault()
    pool_of = ThreadPoolExecutor(args.concurrency)

    def lenient() -> None:
        """Single faults never give up: the rounds measure restarts (and "give up" its own);
        each give-up backs off as a first one does (not doubled: a round is no repeat)."""
        pool.default.last_failure = None
        runtime = pool.default.runtime
        if runtime is not None:
            runtime.worker.restarts = Restarts(limit=10**9)

    def round_(number: int, stage: str | None) -> Counter[str]:
        texts = [f"Round {number}, request {i}. {TEXT}" for i in range(args.concurrency)]
        runtime = pool.default.runtime
        if stage == "give up" and runtime is not None:
            runtime.worker.restarts = Restarts(limit=1)
        fault.armed = stage
        replies = list(pool_of.map(lambda t: respond(base, model, t), texts))
        fault.armed = None
        outcomes = Counter(ended(status, body, stage or "-") for status, body in replies)
        # The next request completes (after a give-up: once the back-off ends, it reloads).
        deadline = time.monotonic() + 60
        while True:
            status, body = respond(base, model, f"After round {number}. {TEXT}")
            if status == 200 and body["status"] in DONE:
                break
            if time.monotonic() > deadline or ended(status, body, stage or "-") == "failed":
                raise RuntimeError(f"round {number} ({stage}): the next request {status} {body}")
            time.sleep(0.1)
        lenient()
        return outcomes

    lenient()
    started = time.perf_counter()
    for number in range(args.warm_up):
        round_(-1 - number, None)
    gc.collect()
    first = rss()
    print(
        f"{args.rounds} rounds of {args.concurrency} concurrent requests at each stage, a fault "
        f"each round, after {args.warm_up} warm-up rounds without ({first / MIB:.0f} MiB); "
        f"before and after each stage {args.settle} rounds without"
    )
    print(
        f"{'stage':<12} {'fired':>5} {'completed':>9} {'failed':>6} {'503':>4} {'next ok':>7} "
        f"{'RSS before':>10} {'after':>6} {'peak':>6} {'after/before':>12} "
        f"{'tier before':>11} {'after':>5} {'MLX cache before':>16} {'after':>5}",
        flush=True,
    )
    failed = False
    number = 0

    quiet = itertools.count(-1 - args.warm_up, -1)  # distinct prompts: cold, as the others

    def tier() -> int:
        """The prompt cache's memory tier, in bytes."""
        runtime = pool.default.runtime
        return runtime.worker.stats.prompt_cache_bytes if runtime is not None else 0

    def settled() -> tuple[int, int, int]:
        """RSS and the memory tier's bytes after `--settle` rounds without faults (the caches
        as the faults' rounds leave them differ: a stage's failures rebuild the memory tier,
        another's keep it)."""
        for _ in range(args.settle):
            round_(next(quiet), None)
        gc.collect()
        return rss(), tier(), mx.get_cache_memory()

    baseline = 0  # the first stage's settled RSS: "at the end" is read the same way
    for stage in args.stages:
        before, tier_before, freed_before = settled()
        baseline = baseline or before
        worst = before
        totals = Counter[str]()
        for _ in range(args.rounds):
            totals += round_(number, stage)
            number += 1
            worst = max(worst, rss())
            if number % 10 == 0:
                print(f"round {number} ({stage}): RSS {rss() / MIB:.0f} MiB", file=sys.stderr)
        after, tier_after, freed_after = settled()
        worst = max(worst, after)
        # Every request ended and each round's next request completed, or round_ raised.
        print(
            f"{stage:<12} {fault.fired[stage]:>5} {totals['completed']:>9} {totals['failed']:>6} "
            f"{totals['refused']:>4} {args.rounds:>7} {before / MIB:>9.0f}M {after / MIB:>5.0f}M "
            f"{worst / MIB:>5.0f}M {after / before:>11.3f}x "
            f"{tier_before / MIB:>6.1f}M {tier_after / MIB:>5.1f}M "
            f"{freed_before / MIB:>11.1f}M {freed_after / MIB:>5.1f}M",
            flush=True,
        )
        failed |= after > 1.1 * before
    last = rss()
    print("every request ended; the request after each fault completed")
    print(
        f"RSS after warm-up {first / MIB:.0f} MiB (unsettled), before the first stage "
        f"{baseline / MIB:.0f} MiB, at the end {last / MIB:.0f} MiB ({last / baseline:.3f}x); "
        f"{time.perf_counter() - started:.0f}s"
    )
    failed |= last > 1.1 * baseline
    if failed:
        raise SystemExit("RSS did not return within 10% of before")


if __name__ == "__main__":
    main()
