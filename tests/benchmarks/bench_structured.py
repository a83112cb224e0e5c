"""Structured-output benchmark: the per-token cost of a grammar over unconstrained decoding.

Runs the engine worker in process (the path requests take, the logits processor inside the
batch) on a random-weight qwen3 with the bundled tokenizer, at batch 1 and 8, the same number
of tokens with and without a JSON Schema constraint, and prints ms/token for each and the
difference (goal: at most 0.5 ms/token). Not a test: figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from mlx_responses.service.engine.blas import preload_blas  # noqa: E402

preload_blas()

from mlx_responses.service.engine.model import LoadedModel, load_model  # noqa: E402
from mlx_responses.service.engine.requests import SamplingParams  # noqa: E402
from mlx_responses.service.engine.structured import GrammarProcessor  # noqa: E402
from mlx_responses.service.engine.worker import EngineWorker  # noqa: E402
from mlx_responses.service.text.grammars import Grammar, GrammarFactory  # noqa: E402
from mlx_responses.service.text.json_bounds import JsonBounds  # noqa: E402

from tests.support.random_model import build_random_model  # noqa: E402

GOAL_MS = 0.5
# minItems keeps the grammar open for the whole run, so both sides decode the same count.
SCHEMA = {
    "type": "array",
    "minItems": 10_000,
    "items": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}, "n": {"type": "integer"}},
        "required": ["city", "n"],
    },
}


async def _run(
    worker: EngineWorker,
    prompt: list[int],
    batch: int,
    tokens: int,
    grammars: GrammarFactory | None,
) -> tuple[float, float, int]:
    """Wall and CPU seconds, and tokens generated, for `batch` concurrent requests."""
    processors: list[list[Any]] = [
        [_processor(grammars.json_schema(SCHEMA, JsonBounds.for_budget(tokens)))]
        if grammars
        else []
        for _ in range(batch)
    ]
    sampling = SamplingParams(max_tokens=tokens, temperature=0.0)
    started, cpu = time.perf_counter(), time.process_time()
    streams = [worker.submit(prompt, sampling, p) for p in processors]

    async def drain(stream: Any) -> int:
        count = 0
        async for chunks in stream.batches():
            count += sum(c.tokens for c in chunks)
        return count

    counts = await asyncio.gather(*(drain(s) for s in streams))
    return time.perf_counter() - started, time.process_time() - cpu, sum(counts)


async def _bench(args: argparse.Namespace, model_path: Path) -> None:
    worker = EngineWorker(
        load=lambda: load_model(model_path),
        max_batch_size=max(args.batches),
        prompt_cache_max_entries=0,
    )
    loaded: LoadedModel = await worker.start()
    grammars = GrammarFactory(loaded.tokenizer._tokenizer, loaded.vocab_size)
    started = time.perf_counter()
    _processor(grammars.json_schema(SCHEMA, JsonBounds.for_budget(args.tokens)))
    first_compile = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(10):
        _processor(grammars.json_schema(SCHEMA, JsonBounds.for_budget(args.tokens)))
    compile_ms = (time.perf_counter() - started) / 10 * 1000
    prompt = loaded.tokenizer.encode("List cities as JSON.", add_special_tokens=False)
    await _run(worker, prompt, 1, 16, grammars)  # warm-up (compile caches, kernels)
    await _run(worker, prompt, 1, 16, None)
    print(
        f"model: {model_path.name} (vocab {loaded.vocab_size}); {args.tokens} tokens/request, "
        f"{args.repeats} interleaved repeats; grammar compile {compile_ms:.1f} ms "
        f"(first, with tokenizer: {first_compile * 1000:.0f} ms)"
    )
    summary = []
    for batch in args.batches:
        walls: dict[str, list[float]] = {"free": [], "json_schema": []}
        cpus: dict[str, list[float]] = {"free": [], "json_schema": []}
        for _ in range(args.repeats):
            # Interleaved, so both sides see the same machine load; min is the least-disturbed.
            for name, factory in (("free", None), ("json_schema", grammars)):
                wall, cpu, produced = await _run(worker, prompt, batch, args.tokens, factory)
                steps = produced / batch  # decode steps: what each client waits per token
                walls[name].append(wall / steps * 1000)
                cpus[name].append(cpu / steps * 1000)
        free, constrained = min(walls["free"]), min(walls["json_schema"])
        extra = constrained - free
        extra_cpu = min(cpus["json_schema"]) - min(cpus["free"])
        paired = statistics.median(
            c - f for c, f in zip(walls["json_schema"], walls["free"], strict=True)
        )
        summary.append(f"batch{batch}_extra_ms={extra:.3f}")
        print(
            f"batch {batch}: free {free:.2f} ms/token, json_schema {constrained:.2f} ms/token "
            f"(min of {args.repeats}): {extra:+.3f} ms per decode step, "
            f"{extra / batch:+.3f} ms per generated token; median paired difference "
            f"{paired:+.3f}; process CPU {extra_cpu:+.3f} ms/step; "
            f"goal <= +{GOAL_MS}: {'met' if extra <= GOAL_MS else 'missed'}"
        )
    print("bench_structured: " + " ".join(summary))
    worker.stop()


def _processor(grammar: Grammar) -> GrammarProcessor:
    return GrammarProcessor(grammar.matcher, grammar.vocab_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    folder = REPO / ".bench" / f"structured-h{args.hidden}-l{args.layers}"
    if not (folder / "model.safetensors").is_file():
        build_random_model(
            folder,
            hidden_size=args.hidden,
            layers=args.layers,
            intermediate_size=args.hidden * 3,
            heads=max(2, args.hidden // 64),
            kv_heads=1,
        )
    asyncio.run(_bench(args, folder))


if __name__ == "__main__":
    main()
