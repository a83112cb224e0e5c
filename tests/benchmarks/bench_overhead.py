"""What serving costs per token: the micro model on CPU, served vs. in process, in one run.

A forward pass of a hidden-64, 2-layer qwen3 takes about a millisecond on a CPU, so the
per-token cost of the serving path (engine bookkeeping, detokenization, event assembly,
protobuf, gRPC, SSE) shows here as it would behind an accelerator's fast forward pass:

- single stream: `mlx-responses serve` decode tok/s vs. in-process `mlx_lm.stream_generate`;
- N streams: `serve` aggregate tok/s (N concurrent SSE streams) vs. in-process mlx-lm
  `BatchGenerator` with all N inserted at once.

Contenders alternate within each repeat (the machine's load hits both alike); medians and
their ratios are printed at the end (goals: >= 0.95 both).
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

REPO = Path(__file__).resolve().parents[2]
GOAL = 0.95
MICRO = {"hidden": 64, "layers": 2, "intermediate": 192, "heads": 2, "kv_heads": 1}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    parser.add_argument("--prompt-tokens", type=int, default=48, help="prompt length")
    parser.add_argument("--streams", type=int, default=8, help="concurrent streams (default 8)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats; medians (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--server-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra flag for `serve` (repeatable, e.g. --server-flag=--stream-interval=2)",
    )
    parser.add_argument(
        "--hold", type=float, default=0.0, help="seconds to keep the server up after (py-spy)"
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="OpenBLAS threads on both sides (default 1; 0: the library's default). With its "
        "default, OpenBLAS's worker spins between the micro model's products and the "
        "in-process 8-stream baseline swings 3,000-4,300 tok/s between repeats; with 1 it "
        "holds within 5%%",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.blas_threads > 0:
        # Read when OpenBLAS loads (below, and in the server, which inherits it): both alike.
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    sys.path.insert(0, str(REPO))
    from mlx_responses.service.engine.blas import preload_blas

    blas = preload_blas()  # before mlx is imported, as the console script does
    from bench_serving import (
        BIN,
        Prompts,
        Shape,
        batch_generator_run,
        build_model,
        cpu_seconds,
        free_port,
        load_average,
        one_stream,
        ours_body,
        run_concurrent,
        server_process,
        stream_generate_decode,
        wait_ours,
    )
    from mlx_lm import load
    from mlx_responses.service.config import BUNDLED_MODEL

    folder = build_model(Shape(context=4096, **MICRO), BUNDLED_MODEL, args.seed)
    model, tokenizer = load(str(folder))
    prompts = Prompts(tokenizer, args.seed)
    eos = sorted(tokenizer.eos_token_ids)
    n, width = args.tokens, args.streams
    port, grpc_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    argv_ = [
        str(BIN / "mlx-responses"),
        "--log-level",
        "WARNING",
        "serve",
        "--model",
        str(folder),
        "--port",
        str(port),
        "--grpc-port",
        str(grpc_port),
        "--max-batch-size",
        str(width),
        *args.server_flag,
    ]
    print(
        f"micro model {MICRO}, {n} tokens/request, {args.prompt_tokens}-token prompts, "
        f"{width} streams, {args.repeats} repeats, BLAS={blas} "
        f"({args.blas_threads or 'default'} threads), load={load_average():.2f}",
        flush=True,
    )
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with server_process("overhead", argv_, env) as proc:
        wait_ours(proc, port, 120)
        alias = folder.name

        def body(text: str) -> dict[str, object]:
            return ours_body(alias, text, n, store=False)

        # Warm-up: both sides compile and touch their buffers once.
        one_stream("ours", base, body(prompts.text(args.prompt_tokens)), 120)
        asyncio.run(
            run_concurrent(
                "ours",
                base,
                [body(prompts.text(args.prompt_tokens)) for _ in range(width)],
                300,
                proc.pid,
            )
        )
        stream_generate_decode(
            model, tokenizer, prompts.render(prompts.text(args.prompt_tokens)), n
        )
        batch_generator_run(
            model,
            eos,
            [prompts.render(prompts.text(args.prompt_tokens)) for _ in range(width)],
            n,
            width,
        )
        for rep in range(args.repeats):
            text = prompts.text(args.prompt_tokens)
            cpu = time.process_time()
            single = stream_generate_decode(model, tokenizer, prompts.render(text), n)
            add("inproc_single_cpu_ms", (time.process_time() - cpu) / n * 1e3)
            add("inproc_single", single.decode_tps)
            cpu = cpu_seconds(proc.pid)
            served = one_stream("ours", base, body(prompts.text(args.prompt_tokens)), 120)
            add("served_single_cpu_ms", (cpu_seconds(proc.pid) - cpu) / n * 1e3)
            add("served_single", served.decode_tps)
            if served.tokens != n or single.tokens != n:
                print(f"  ! token counts: served {served.tokens}, in process {single.tokens}")
            texts = [prompts.text(args.prompt_tokens) for _ in range(width)]
            batch = batch_generator_run(model, eos, [prompts.render(t) for t in texts], n, width)
            add("inproc_batch", batch.tps)
            add("inproc_batch_cpu_ms", batch.cpu_ms_per_token(batch.server_cpu))
            texts = [prompts.text(args.prompt_tokens) for _ in range(width)]
            many = asyncio.run(
                run_concurrent("ours", base, [body(t) for t in texts], 300, proc.pid)
            )
            add("served_batch", many.tps)
            add("served_batch_ttft_max", max(many.ttfts))
            add("inproc_batch_ttft_max", max(batch.ttfts))
            add("served_batch_cpu_ms", many.cpu_ms_per_token(many.server_cpu))
            print(
                f"  repeat {rep + 1}: 1 stream {single.decode_tps:.0f} in process / "
                f"{served.decode_tps:.0f} served tok/s; {width} streams "
                f"{batch.tps:.0f} in process / {many.tps:.0f} served tok/s",
                flush=True,
            )
        if args.hold > 0:
            print(f"server pid {proc.pid} held {args.hold:.0f}s", flush=True)
            time.sleep(args.hold)

    med = {k: statistics.median(v) for k, v in samples.items()}
    single_ratio = med["served_single"] / med["inproc_single"]
    batch_ratio = med["served_batch"] / med["inproc_batch"]
    print()
    print(f"{'':34}{'in process':>12}{'served':>12}{'ratio':>8}  goal")
    for label, a, b, r in (
        ("1 stream, decode tok/s", "inproc_single", "served_single", single_ratio),
        (f"{width} streams, aggregate tok/s", "inproc_batch", "served_batch", batch_ratio),
    ):
        verdict = "ok" if r >= GOAL else "MISS"
        print(f"{label:34}{med[a]:>12.0f}{med[b]:>12.0f}{r:>8.2f}  >= {GOAL} {verdict}")
    # CPU time per token (every thread of the process) is steadier than wall time on a
    # loaded machine: the server's extra over in process is what serving costs.
    for label, a, b in (
        ("1 stream, CPU ms/token", "inproc_single_cpu_ms", "served_single_cpu_ms"),
        (f"{width} streams, CPU ms/token", "inproc_batch_cpu_ms", "served_batch_cpu_ms"),
    ):
        print(f"{label:34}{med[a]:>12.2f}{med[b]:>12.2f}{med[b] / med[a]:>8.2f}")
    print(
        f"{width} streams, slowest TTFT: {med['inproc_batch_ttft_max'] * 1e3:.0f} ms in process, "
        f"{med['served_batch_ttft_max'] * 1e3:.0f} ms served; load={load_average():.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
