"""A checkpoint's own MTP head, served: our server with it vs. without it (--no-mtp), and vs.
`mlx_vlm.server --draft-model <same folder> --draft-kind mtp`, all on one checkpoint in one run.

Figures (decode tok/s: first streamed token to last, medians over --repeats interleaved runs):
- one stream, greedy: with the head vs. without (goal >= 1.5x);
- one stream, temperature 0.7 (seeded): with vs. without (goal >= 1.3x);
- --streams streams at once, greedy (aggregate decode tok/s): with vs. without (goal >= 1.0x);
- one stream, greedy: ours with the head vs. mlx_vlm.server with it (goal >= 1.0x).
Each server runs in its own process; the machine's load is printed beside the figures.

    python tests/benchmarks/bench_mtp.py --model service/assets/tiny-qwen35-mtp
"""

from __future__ import annotations

import argparse
import asyncio
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

from bench_serving import (  # noqa: E402
    BIN,
    HTTP_TIMEOUT,
    free_port,
    load_average,
    mlx_lm_body,
    ours_body,
    run_concurrent,
    server_process,
    stream_mlx_lm,
    stream_ours,
    wait_mlx_lm,
    wait_ours,
)

PROMPTS = (
    "Tell me a short story about a fox who finds a lantern.",
    "Explain how rain forms, step by step.",
    "Write a list of five things to pack for a camping trip.",
    "Describe your favourite season and why.",
    "What does a gardener do in spring?",
    "Give me directions to make a cup of tea.",
    "Write a short poem about the sea.",
    "Summarize the plot of a detective story in a few sentences.",
)


def _one(kind: str, base: str, body: dict[str, Any], timeout: float) -> float:
    """Decode tok/s of one streamed request."""

    async def go() -> float:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
            fn = stream_ours if kind == "ours" else stream_mlx_lm
            result = await asyncio.wait_for(fn(client, base, body), timeout)
        return result.decode_tps

    return asyncio.run(go())


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=REPO / "service/assets/tiny-qwen35-mtp")
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--num-draft-tokens", type=int, default=3)
    parser.add_argument("--no-mlx-vlm", action="store_true", help="skip mlx_vlm.server")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    folder = args.model.resolve()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t = args.timeout

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
            str(max(8, args.streams)),
            "--num-draft-tokens",
            str(args.num_draft_tokens),
            "--no-prompt-cache-disk",
            *flags,
        ]

    mtp_port, plain_port, vlm_port = free_port(), free_port(), free_port()
    bases = {
        "mtp": f"http://127.0.0.1:{mtp_port}",
        "plain": f"http://127.0.0.1:{plain_port}",
        "mlx_vlm": f"http://127.0.0.1:{vlm_port}",
    }
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
        str(vlm_port),
        "--host",
        "127.0.0.1",
    ]
    alias = folder.name
    figures: dict[str, list[float]] = {}

    def record(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)
        print(f"  {name}: {value:.1f} tok/s", flush=True)

    with (
        server_process("mtp", serve(mtp_port), env) as mtp,
        server_process("plain", serve(plain_port, "--no-mtp"), env) as plain,
    ):
        wait_ours(mtp, mtp_port, t)
        wait_ours(plain, plain_port, t)
        # Warm both (first requests compile and fill the prompt cache's structures).
        for base in (bases["mtp"], bases["plain"]):
            _one("ours", base, ours_body(alias, PROMPTS[0], 8), t)
        for r in range(args.repeats):
            text = PROMPTS[r % len(PROMPTS)]
            order = ("mtp", "plain") if r % 2 == 0 else ("plain", "mtp")
            for which in order:
                greedy = ours_body(alias, text, args.tokens)
                record(f"{which}.greedy.1", _one("ours", bases[which], greedy, t))
                sampled = ours_body(alias, text, args.tokens, temperature=0.7, seed=r)
                record(f"{which}.t07.1", _one("ours", bases[which], sampled, t))
                bodies = [
                    ours_body(alias, PROMPTS[(r + i) % len(PROMPTS)], args.tokens)
                    for i in range(args.streams)
                ]
                pid = (mtp if which == "mtp" else plain).pid
                run = asyncio.run(run_concurrent("ours", bases[which], bodies, t, pid))
                record(f"{which}.greedy.{args.streams}", run.decode_tps)
    if not args.no_mlx_vlm:
        with (
            server_process("mtp", serve(mtp_port), env) as mtp,
            server_process("mlx_vlm", vlm_argv, env) as vlm,
        ):
            wait_ours(mtp, mtp_port, t)
            wait_mlx_lm(vlm, vlm_port, t)
            _one("ours", bases["mtp"], ours_body(alias, PROMPTS[0], 8), t)
            _one("mlx_vlm", bases["mlx_vlm"], mlx_lm_body(PROMPTS[0], 8), t)
            for r in range(args.repeats):
                text = PROMPTS[r % len(PROMPTS)]
                bodies_by = {
                    "ours": ("ours", bases["mtp"], ours_body(alias, text, args.tokens)),
                    "mlx_vlm": ("mlx_vlm", bases["mlx_vlm"], mlx_lm_body(text, args.tokens)),
                }
                names = ["ours", "mlx_vlm"] if r % 2 == 0 else ["mlx_vlm", "ours"]
                for name in names:
                    kind, base, body = bodies_by[name]
                    record(f"side.{name}.greedy.1", _one(kind, base, body, t))
    m = {name: _median(values) for name, values in figures.items()}
    n = args.streams
    print(f"\nmodel {folder}, {args.tokens} tokens/request, load {load_average():.2f}")
    rows = [
        ("1 stream greedy, MTP vs none", m["mtp.greedy.1"], m["plain.greedy.1"], 1.5),
        ("1 stream t=0.7, MTP vs none", m["mtp.t07.1"], m["plain.t07.1"], 1.3),
        (f"{n} streams greedy, MTP vs none", m[f"mtp.greedy.{n}"], m[f"plain.greedy.{n}"], 1.0),
    ]
    if not args.no_mlx_vlm:
        rows.append(
            (
                "1 stream greedy, ours vs mlx_vlm.server",
                m["side.ours.greedy.1"],
                m["side.mlx_vlm.greedy.1"],
                1.0,
            )
        )
    summary = []
    for label, a, b, goal in rows:
        ratio = _ratio(a, b)
        verdict = "meets" if ratio >= goal else "MISSES"
        print(f"{label:<44}{a:>9.1f} vs {b:>9.1f} tok/s  {ratio:5.2f}x  ({verdict} {goal}x)")
        summary.append(f"{label.replace(' ', '_')}={ratio:.2f}")
    print("bench: " + " ".join(summary), f"time={time.strftime('%H:%M')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
