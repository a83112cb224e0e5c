"""Time to first token of a long prompt cold, warm from memory, and warm from disk after a restart.

Coding agents resend the same long prefix (Claude Code's requests are 44-49k tokens). One round:
an engine serves a long prompt cold, then the same prompt again (warm, from its memory cache);
it stops (a restart), and a fresh engine over the same prompt-cache folder serves the prompt a
third time: what it reads comes from the disk tier. Prints the medians of each TTFT with the
prompt tokens the cache served, the disk read's seconds and the entry files' bytes, and ratios.
Not a test.

    .venv/bin/python tests/benchmarks/bench_prompt_disk.py [--tokens 16000] [--repeats 3]
        [--model PATH] [--kv-bits 8] [--no-window]

`--no-window`: the model's copy with its sliding window off (plain caches, which the disk tier
trims to the prompt's common prefix; an entry grows with its prompt).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_responses.service.engine.blas import preload_blas

preload_blas()

from mlx_responses.service.engine.model import load_model  # noqa: E402
from mlx_responses.service.engine.requests import SamplingParams  # noqa: E402
from mlx_responses.service.engine.worker import EngineWorker  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "service/assets/tiny-chat"
TEXT = (
    "The harbour town woke early: fishermen mended nets, the baker lit his ovens, and the "
    "children ran down to the pier to count the boats coming home with the morning tide. "
)


async def _ttft(engine: EngineWorker, prompt: list[int]) -> tuple[float, int]:
    """Seconds to the first token, and the prompt tokens the cache served."""
    started = time.perf_counter()
    first = None
    cached = 0
    sampling = SamplingParams(max_tokens=8, temperature=0.0)
    async for chunks in engine.submit(prompt, sampling).batches():
        if first is None:
            first = time.perf_counter() - started
            cached = chunks[0].cached_tokens
    assert first is not None
    return first, cached


async def _round(model: Path, prompt: list[int], **worker: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        on: dict[str, Any] = {
            "prompt_cache_dir": Path(folder),
            "prompt_cache_disk_bytes": 64 << 30,
            "prompt_cache_max_bytes": 64 << 30,
            **worker,
        }
        first = EngineWorker(lambda: load_model(model), **on)
        await first.start()
        try:
            await _ttft(first, prompt[:8])  # a fresh engine's first forward sets up its kernels
            cold = await _ttft(first, prompt)
            assert first._disk is not None
            # The entry is written behind the turn; waited for here so that the warm figure
            # is not measured against a write on the same cores.
            written = time.perf_counter()
            first._disk.flush(600)
            behind = time.perf_counter() - written
            warm = await _ttft(first, prompt)
            first._disk.flush(600)
            put = first._disk.put_seconds / max(1, first._disk.writes)
        finally:
            first.stop()
        restarted = EngineWorker(lambda: load_model(model), **on)
        await restarted.start()
        try:
            await _ttft(restarted, prompt[:8])  # as on the first engine: not a hit
            disk = await _ttft(restarted, prompt)
            assert restarted._disk is not None
            read = restarted._disk.read_seconds
            restarted._disk.flush(600)
        finally:
            restarted.stop()
        nbytes = sum(p.stat().st_size for p in (Path(folder) / "entries").iterdir())
    return {
        "cold": cold,
        "memory": warm,
        "disk": disk,
        "read": read,
        "bytes": nbytes,
        "behind": behind,
        "put": put,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16000, help="the prompt's length")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--kv-bits", type=int, default=None)
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--no-window", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as copy:
        if args.no_window:
            args.model = _without_window(args.model, Path(copy))
        await _bench(args)


def _without_window(model: Path, folder: Path) -> Path:
    out = folder / model.name
    shutil.copytree(model, out)
    config = json.loads((out / "config.json").read_text())
    config["use_sliding_window"] = False
    (out / "config.json").write_text(json.dumps(config))
    return out


async def _bench(args: argparse.Namespace) -> None:
    tokenizer = load_model(args.model).tokenizer
    unit = tokenizer.encode(TEXT)
    prompt = [*(unit * (args.tokens // len(unit) + 1))[: args.tokens], *tokenizer.encode(" Why?")]
    worker = {"kv_bits": args.kv_bits, "engine": args.engine}
    rounds = [await _round(args.model, prompt, **worker) for _ in range(args.repeats)]

    def median(key: str) -> float:
        return statistics.median(r[key][0] * 1000 for r in rounds)

    print(
        f"{args.model.name}{' (no window)' if args.no_window else ''}, "
        f"prompt {len(prompt)} tokens, kv-bits {args.kv_bits}, "
        f"engine {args.engine}, {args.repeats} rounds (medians):"
    )
    for key, label in (("cold", "cold"), ("memory", "warm, memory"), ("disk", "warm, disk")):
        cached = rounds[-1][key][1]
        print(
            f"  {label:13} TTFT {median(key):9.1f} ms  cached {cached:6} "
            f"({100 * cached / len(prompt):5.1f}% of the prompt)"
        )
    read = statistics.median(r["read"] for r in rounds) * 1000
    size = rounds[-1]["bytes"] / (1 << 20)
    behind = statistics.median(r["behind"] for r in rounds) * 1000
    print(f"  disk read {read:.1f} ms of entries totalling {size:.1f} MiB on disk")
    put = statistics.median(r["put"] for r in rounds) * 1000
    print(
        f"  an entry's hand-over on the engine thread {put:.1f} ms; its write went on "
        f"{behind:.1f} ms past the end of the cold turn (on the writer thread)"
    )
    print(
        f"  cold/disk {median('cold') / median('disk'):.2f}x, "
        f"disk/memory {median('disk') / median('memory'):.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
