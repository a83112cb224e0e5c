"""Where a drafting round's time goes, against a plain decode step, in process on the trained
tiny Qwen3.5 (service/assets/tiny-qwen35-mtp, loaded as the engine loads it: a VLM whose
hybrid language side runs in mlx-lm's batch, its MTP head riding along).

One engine worker serves tiny-chat's held-out "think" conversations one at a time (greedy, or
`--temperature`), drafting at every step (`--always`, the default: the policy's clock and the
head's cost taken out, so that every step is a round) or as the policy decides (`--policy`);
then the same requests with drafting stepped aside (`--off`: the head still reads what the
target saw). Each step's wall and CPU (process) milliseconds are kept by what it did; with
`--sync` each piece of a round is also evaluated where it ends (`mx.eval`), so its own cost
shows: the head's drafts (`HeadedModel.drafts`), the verify forward with the head's read of
the drafts' positions (`_target`), the verdicts and bookkeeping (`_verify` without `_target`),
the roll-back of the rejected positions (`_keep_head`). Medians and means in ms; give the
load (`uptime`) beside them.

    flock /tmp/bench.lock python tests/benchmarks/bench_mtp_round.py --sync
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from mlx_responses.service.engine.blas import preload_blas  # noqa: E402

preload_blas()  # as `serve` does, before mlx loads

import mlx.core as mx  # noqa: E402
from mlx_responses.service.engine import speculation  # noqa: E402
from mlx_responses.service.engine.batch.grammar_batch import GrammarGenerationBatch  # noqa: E402
from mlx_responses.service.engine.batch.speculative import (  # noqa: E402
    SpeculativeGenerationBatch,
)
from mlx_responses.service.engine.heads import HeadedModel  # noqa: E402
from mlx_responses.service.engine.requests import SamplingParams  # noqa: E402
from mlx_responses.service.engine.worker import EngineWorker  # noqa: E402
from mlx_responses.service.models.vision_runtime import load_vision_model  # noqa: E402

Times = dict[str, list[tuple[float, float]]]


def timed(times: Times, name: str, fn: Callable[..., Any], sync: Callable[..., Any] | None) -> Any:
    """`fn`, its wall and CPU seconds kept under `name` (evaluated where it ends: `sync`)."""

    def wrap(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn(*args, **kwargs)
        if sync is not None:
            mx.eval(sync(args, out))
        times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        return out

    return wrap


def instrument(times: Times, sync: bool) -> None:
    """Times each decode step by the tokens it sent, and each piece of a round."""
    step = GrammarGenerationBatch.next

    def next_step(self: GrammarGenerationBatch) -> list[Any]:
        policy = getattr(self, "policy", None)
        verifies = policy.verify_steps if policy is not None else 0
        wall, cpu = time.perf_counter(), time.process_time()
        out: list[Any] = step(self)
        verified = policy is not None and policy.verify_steps > verifies
        kind = "round" if verified else "plain step"
        times[kind].append((time.perf_counter() - wall, time.process_time() - cpu))
        times["tokens"].append((len(out), 0.0))
        return out

    GrammarGenerationBatch.next = next_step  # type: ignore[method-assign]
    batch = SpeculativeGenerationBatch
    caches = lambda args, out: [c.state for c in args[0].prompt_cache]  # noqa: E731
    pieces: list[tuple[Any, str, str, Callable[..., Any]]] = [
        (HeadedModel, "drafts", "drafts (head)", lambda args, out: out),
        (batch, "_target", "verify forward + head read", lambda a, o: [o, *caches(a, o)]),
        (batch, "_verify", "verify, all", caches),
        (batch, "_keep_head", "roll-back", caches),
    ]
    for owner, method, name, what in pieces:
        setattr(owner, method, timed(times, name, getattr(owner, method), what if sync else None))


def conversations(n: int) -> list[Any]:
    from training.tiny_chat.data import eval_prompts

    found = [p.messages for p in eval_prompts("think", 8 * n) if p.variant == "think_request"]
    plain = [m for m in found if all(set(x) == {"role", "content"} for x in m)]
    return plain[:n]


async def serve(folder: Path, requests: int, temperature: float) -> tuple[int, float]:
    """The requests, one at a time, twice (the first pass warms); tokens and decode seconds of
    the second."""
    loaded = load_vision_model(folder, "tiny")
    render = loaded.tokenizer.apply_chat_template
    prompts = [render(m, add_generation_prompt=True) for m in conversations(requests)]
    worker = EngineWorker(lambda: loaded, engine="batch", speculative="ngram", max_batch_size=8)
    await worker.start()
    sampling = SamplingParams(max_tokens=64, temperature=temperature, seed=1)
    tokens, seconds = 0, 0.0
    try:
        for rep in range(2):
            for prompt in prompts:
                stamps: list[float] = []
                async for chunks in worker.submit(prompt, sampling).batches():
                    stamps += [time.perf_counter()] * sum(len(c.token_ids) for c in chunks)
                if rep:
                    tokens += len(stamps) - 1
                    seconds += stamps[-1] - stamps[0]
    finally:
        worker.stop()
    return tokens, seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=REPO / "service/assets/tiny-qwen35-mtp")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=0.0)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--policy", action="store_true", help="draft as the policy decides")
    mode.add_argument("--off", action="store_true", help="drafting stepped aside")
    parser.add_argument("--sync", action="store_true", help="evaluate each piece of a round")
    args = parser.parse_args(argv)
    if not args.policy:  # every step drafts, or none does
        width = speculation.best_width
        speculation.StepClock.best_width = (  # type: ignore[method-assign]
            (lambda self, likely, batch, extra=0.0: 0)
            if args.off
            else (lambda self, likely, batch, extra=0.0: width(likely, batch, 0.0))
        )
    times: Times = defaultdict(list)
    instrument(times, args.sync)
    label = "off" if args.off else "policy" if args.policy else "always"
    tokens, seconds = asyncio.run(serve(args.model.resolve(), args.requests, args.temperature))
    sent = sum(int(n) for n, _ in times.pop("tokens"))
    steps = sum(len(times[k]) for k in ("plain step", "round"))
    wall = sum(w for k in ("plain step", "round") for w, _ in times[k])
    cpu = sum(c for k in ("plain step", "round") for _, c in times[k])
    print(
        f"{label}, T={args.temperature}, sync={args.sync}: decode {tokens / seconds:.1f} tok/s; "
        f"{steps} steps (both passes) sent {sent} tokens, {1e3 * wall / sent:.2f} ms wall and "
        f"{1e3 * cpu / sent:.2f} ms CPU a token"
    )
    for name, values in ((k, v) for k, v in times.items() if v):
        walls, cpus = [w for w, _ in values], [c for _, c in values]
        print(
            f"  {name:<28} n={len(values):>5}  wall median {1e3 * statistics.median(walls):6.2f} "
            f"mean {1e3 * statistics.mean(walls):6.2f}  CPU median "
            f"{1e3 * statistics.median(cpus):6.2f} mean {1e3 * statistics.mean(cpus):6.2f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
