"""In-process cost of speculative decoding: BatchGenerator plain vs. with our n-gram batch.

Three contenders on the same prompts: the library's decode, our speculative batch, and our
speculative batch whose drafts are always wrong (the worst case: every verify is wasted, so
the back-off alone limits the loss). Same model and run, so the ratios are comparable even on
a noisy machine; absolute tokens/s are not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _wrong_drafter(token: int) -> Any:
    """An n-gram drafter proposing a token greedy decoding never picks (a banned one): every
    draft is rejected."""
    from service.engine.speculative import NgramDrafter

    class WrongDrafter(NgramDrafter):
        def draft(self, k: int) -> list[int]:
            return [token] * len(super().draft(k))

    return WrongDrafter()


def _run(
    model: Any, prompts: list[list[int]], tokens: int, *, mode: str, k: int, bad: int
) -> float:
    from mlx_lm.generate import BatchGenerator

    from service.engine.speculative import SpeculativeGenerationBatch

    generator = BatchGenerator(model, completion_batch_size=16, prefill_step_size=512)
    batch = None
    if mode != "plain":
        batch = SpeculativeGenerationBatch.empty(model, generator.sampler)
        batch.num_draft = k
        generator._generation_batch = batch
    uids = generator.insert(prompts, max_tokens=[tokens] * len(prompts))
    if batch is not None:
        batch.eligible.update(uids)
        if mode == "wrong":
            for uid in uids:
                batch.drafters[uid] = _wrong_drafter(bad)
    pending, count, start = set(uids), 0, 0.0
    while pending:
        _, responses = generator.next()
        for r in responses:
            if not start:
                start = time.perf_counter()
                continue  # rate from the first token on, as decode tok/s elsewhere
            count += 1
            if r.finish_reason is not None:
                pending.discard(r.uid)
    generator.close()
    return count / (time.perf_counter() - start)


def main(argv: Sequence[str] | None = None) -> int:
    """Prints tokens/s per contender and stream count, then a `bench:` summary line."""
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, required=True, help="a model folder (bench's)")
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--num-draft-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs; medians")
    parser.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    args = parser.parse_args(argv)

    from service.engine.blas import preload_blas

    preload_blas()
    from bench_serving import Prompts, banned_token_ids
    from mlx_lm import load

    model, tokenizer = load(str(args.model))[:2]
    prompts = Prompts(tokenizer, 1)
    bad = banned_token_ids(tokenizer)[-1]
    summary = []
    for n in args.streams:
        samples: dict[str, list[float]] = {"plain": [], "ngram": [], "wrong": []}
        modes = list(samples)
        for r in range(args.repeats):
            texts = [prompts.render(prompts.file_task(400)) for _ in range(n)]
            for mode in modes[r % 3 :] + modes[: r % 3]:  # rotated: no contender always first
                k = args.num_draft_tokens
                samples[mode].append(_run(model, texts, args.tokens, mode=mode, k=k, bad=bad))
        rates = {mode: statistics.median(values) for mode, values in samples.items()}
        print(f"@{n}: " + " ".join(f"{m}={r:.1f} tok/s" for m, r in rates.items()), flush=True)
        summary += [
            f"ngram_vs_plain_{n}={rates['ngram'] / rates['plain']:.2f}",
            f"rejected_vs_plain_{n}={rates['wrong'] / rates['plain']:.2f}",
        ]
    print("bench: " + " ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
