"""Time to first token of a repeat, a next turn and a new conversation, on a sliding-window model.

The bundled model attends over a 2,048-token window, so its prompt-cache entries cannot be
trimmed once a prompt is longer. Four requests, each once the last finished: a long system turn
and a question (cold), the same prompt again (a retry), a next turn that carries a reply other
than the one the model wrote (as templates render history), and a new conversation under the
same system turn (submitted with its end as the checkpoint, as the server does). Two engines in
one run, alternating: this build, and this build with the entries prompts leave before their end
switched off (what the server did before: only finished turns were cached). Prints medians and
ratios. Not a test.

    .venv/bin/python tests/benchmarks/bench_prompt_checkpoints.py [--tokens 8000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
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


class WithoutCheckpoints(EngineWorker):
    """This build with prompts leaving no entry where their prefill ends."""

    def _checkpoint(self, tokens: list[int], cache: list[Any], scope: str) -> None:
        return None


async def _ttft(engine: EngineWorker, prompt: list[int], system: int) -> tuple[float, int]:
    """Seconds to the first token, and the prompt tokens the cache served."""
    started = time.perf_counter()
    first = None
    cached = 0
    sampling = SamplingParams(max_tokens=8, temperature=0.0)
    async for chunks in engine.submit(prompt, sampling, (), (system,)).batches():
        if first is None:
            first = time.perf_counter() - started
            cached = chunks[0].cached_tokens
    assert first is not None
    return first, cached


async def _round(
    kind: type[EngineWorker], prompts: list[list[int]], system: int
) -> list[tuple[float, int]]:
    engine = kind(lambda: load_model(MODEL), engine="auto")
    await engine.start()
    try:
        return [await _ttft(engine, prompt, system) for prompt in prompts]
    finally:
        engine.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8000, help="the system turn's length")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tokenizer = load_model(MODEL).tokenizer
    unit = tokenizer.encode(TEXT)
    system = (unit * (args.tokens // len(unit) + 1))[: args.tokens]
    prompt = [*system, *tokenizer.encode(" Where is the harbour?")]
    turn = [*prompt, *tokenizer.encode(" A reply the model did not write. And then what?")]
    other = [*system, *tokenizer.encode(" Who bakes the bread?")]
    prompts = [prompt, prompt, turn, other]
    names = ("cold", "repeat", "next turn", "new conversation")
    kinds: dict[str, type[EngineWorker]] = {"before": WithoutCheckpoints, "now": EngineWorker}
    times: dict[str, list[list[float]]] = {k: [[] for _ in prompts] for k in kinds}
    cached: dict[str, list[int]] = {}
    for _ in range(args.repeats):
        for name, kind in kinds.items():
            results = await _round(kind, prompts, len(system))
            for i, (seconds, _) in enumerate(results):
                times[name][i].append(seconds)
            cached[name] = [hit for _, hit in results]
    print(
        f"bundled model (window 2048), system turn {len(system)} tokens, prompt {len(prompt)}, "
        f"{args.repeats} rounds:"
    )
    for i, label in enumerate(names):
        before, now = (statistics.median(times[k][i]) * 1000 for k in kinds)
        print(
            f"  {label:16} TTFT before {before:8.1f} ms (cached {cached['before'][i]:5})"
            f"  now {now:8.1f} ms (cached {cached['now'][i]:5})  before/now {before / now:6.2f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
