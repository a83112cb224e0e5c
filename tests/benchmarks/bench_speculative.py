"""In-process cost of speculative decoding: BatchGenerator plain vs. with our n-gram batch.

Contenders on the same prompts: the library's decode (plain); n-gram drafts (ngram); n-gram
drafts that are always wrong (wrong: the worst case, where only the drafting policy limits the
loss); a draft model that is the target cut to its first layers (draft); an independent random
draft model, whose drafts are all wrong (rand); and the target drafting for itself with the
policy's cost check off (self: the mechanics at full acceptance, never a gain since the draft
costs a target forward). Same model and run, so the ratios are comparable even on a noisy
machine; absolute tokens/s are not. CPU ms per token (process time) is less sensitive to
other load than wall time, and is reported next to it.

`--temperature T` samples every stream at T (each from its own seed, `--seed` + its index, so
the n-gram contenders emit the very tokens plain does): the drafts are then kept by exact
speculative sampling (`engine/acceptance.py`) rather than greedy agreement. A random model's
next-token distribution is nearly flat, so sampled it never repeats anything; `--sharpen S`
scales its final norm (its logits) by S, and the truncated draft's with it, so that sampling at
T follows the loops its greedy decoding falls into, as a trained model's does on text it
repeats (the bundled tiny model is too small to copy a file).

`--served` measures instead the engine worker as `serve` runs it (`speculative_served.py`):
the bundled tiny-chat, no drafts vs. n-gram drafts vs. a draft model, greedy and at
temperature 0.7 (`--temperatures`), 1 and 8 streams (`--streams`), on a prompt it repeats and
one it does not (`--prompts`), ratios beside; `--deeper N`: tiny-chat drafting for a target
deepened to N layers.
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
    from mlx_responses.service.engine.speculation import NgramDrafter

    class WrongDrafter(NgramDrafter):
        def draft(self, k: int) -> list[int]:
            return [token] * len(super().draft(k))

    return WrongDrafter()


def sharpened(model: Any, factor: float) -> Any:
    """`model` with its logits scaled by `factor` (its final norm's weight)."""
    if factor != 1.0:
        model.model.norm.weight = model.model.norm.weight * factor
    return model


def truncated(folder: Path, layers: int) -> Any:
    """The bench model cut to its first `layers` layers (same embeddings): a cheap draft that
    agrees with the full model as far as the random residual stream lets it."""
    from mlx_lm import load

    model = load(str(folder))[0]
    model.model.layers = model.model.layers[:layers]
    return model


def random_draft(like: Any, hidden: int) -> Any:
    """An independent random model of the same vocabulary: its drafts are (nearly) all wrong."""
    import mlx.core as mx
    from mlx_lm.models import qwen3

    mx.random.seed(7)
    args = {
        "model_type": "qwen3",
        "hidden_size": hidden,
        "num_hidden_layers": 1,
        "intermediate_size": hidden * 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": hidden // 2,
        "rms_norm_eps": 1e-6,
        "vocab_size": like.args.vocab_size,
        "max_position_embeddings": 4096,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
    }
    model = qwen3.Model(qwen3.ModelArgs.from_dict(args))
    mx.eval(model.parameters())
    return model


def _run(
    model: Any,
    prompts: list[list[int]],
    tokens: int,
    *,
    mode: str,
    k: int,
    bad: int,
    drafts: dict[str, Any],
    temperature: float = 0.0,
    seed: int = 0,
) -> tuple[float, float, str]:
    """Decode tokens/s (wall), CPU ms per token and the drafting record of one contender."""
    from mlx_lm.generate import BatchGenerator
    from mlx_responses.service.engine.batch.speculative import SpeculativeGenerationBatch
    from mlx_responses.service.engine.draft_model import DraftedModel

    pair = None
    if mode in drafts:
        pair = DraftedModel(model, drafts[mode], model.args.vocab_size)
        if mode == "self":
            pair.cost_ratio = lambda: 0.0  # type: ignore[method-assign]
    served = model if pair is None else pair
    generator = BatchGenerator(served, completion_batch_size=16, prefill_step_size=512)
    batch = None
    if mode != "plain":
        batch = SpeculativeGenerationBatch.empty(served, generator.sampler)
        batch.num_draft, batch.drafted = k, pair
        generator._generation_batch = batch
    from mlx_responses.service.engine.seeded_sampler import Samplers

    new = Samplers()
    samplers = [new(temperature, 1.0, 0, seed + i) for i in range(len(prompts))]
    uids = generator.insert(prompts, max_tokens=[tokens] * len(prompts), samplers=samplers)
    if batch is not None:
        batch.eligible.update(uids)
        if mode == "wrong":
            for uid in uids:
                batch.policy.records[uid] = _wrong_drafter(bad)
    pending, count, start, cpu, steps = set(uids), 0, 0.0, 0.0, 0
    while pending:
        _, responses = generator.next()
        steps += bool(responses)
        for r in responses:
            if not start:
                start, cpu = time.perf_counter(), time.process_time()
                continue  # rate from the first token on, as decode tok/s elsewhere
            count += 1
            if r.finish_reason is not None:
                pending.discard(r.uid)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    generator.close()
    record = f"{steps} steps"
    if batch is not None:
        record += (
            f", {batch.verify_steps} verifies, {batch.accepted_tokens}/{batch.drafted_tokens} "
            "drafts kept"
        )
    return count / wall, cpu / count * 1e3, record


MODES = ("plain", "ngram", "wrong", "draft", "rand", "self")


def main(argv: Sequence[str] | None = None) -> int:
    """Prints tokens/s per contender and stream count, then a `bench:` summary line."""
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, help="a model folder (bench's)")
    parser.add_argument(
        "--served", action="store_true", help="the engine worker on tiny-chat (see above)"
    )
    parser.add_argument("--seeded", action="store_true", help="--served: seeded streams at 0.7")
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--num-draft-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs; medians")
    parser.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument(
        "--draft-layers", type=int, default=2, help="layers of the truncated draft (default 2)"
    )
    parser.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES))
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    parser.add_argument("--seed", type=int, default=0, help="stream i samples from seed + i")
    parser.add_argument("--prompt-tokens", type=int, default=400, help="the file's length")
    parser.add_argument("--sharpen", type=float, default=1.0, help="logits scale (see above)")
    floats = lambda s: [float(x) for x in s.split(",")]  # noqa: E731
    parser.add_argument("--temperatures", type=floats, default=[0.0, 0.7], help="--served")
    parser.add_argument("--prompts", type=lambda s: s.split(","), default=["repeats", "varies"])
    parser.add_argument("--deeper", type=int, default=0, help="--served: see its docstring")
    parser.add_argument("--perturb", type=float, default=0.3, help="--served --deeper")
    args = parser.parse_args(argv)
    if args.served:
        import asyncio

        from speculative_served import run

        items = asyncio.run(run(args))
        print("bench: " + " ".join(items))
        return 0
    if args.model is None:
        parser.error("--model is required (without --served)")

    from mlx_responses.service.engine.blas import preload_blas

    preload_blas()
    from bench_serving import Prompts, banned_token_ids
    from mlx_lm import load

    model, tokenizer = load(str(args.model))[:2]
    sharpened(model, args.sharpen)
    drafts = {
        "draft": sharpened(truncated(args.model, args.draft_layers), args.sharpen),
        "rand": random_draft(model, 128),
        "self": model,
    }
    prompts = Prompts(tokenizer, 1)
    bad = banned_token_ids(tokenizer)[-1]
    modes = [m for m in MODES if m in args.modes]
    summary = []
    for n in args.streams:
        wall: dict[str, list[float]] = {m: [] for m in modes}
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        for r in range(args.repeats):
            texts = [prompts.render(prompts.file_task(args.prompt_tokens)) for _ in range(n)]
            shift = r % len(modes)
            for mode in modes[shift:] + modes[:shift]:  # rotated: no contender always first
                k = args.num_draft_tokens
                rate, ms, record = _run(
                    model,
                    texts,
                    args.tokens,
                    mode=mode,
                    k=k,
                    bad=bad,
                    drafts=drafts,
                    temperature=args.temperature,
                    seed=args.seed + r * 1000,
                )
                print(f"  @{n} [{r}] {mode}: {rate:.1f} tok/s, {ms:.2f} cpu ms/tok, {record}")
                wall[mode].append(rate)
                cpu[mode].append(ms)
        rates = {m: statistics.median(v) for m, v in wall.items()}
        costs = {m: statistics.median(v) for m, v in cpu.items()}
        print(
            f"@{n}: "
            + " ".join(f"{m}={rates[m]:.1f} tok/s ({costs[m]:.2f} cpu ms/tok)" for m in modes),
            "ranges: " + " ".join(f"{m}={min(v):.0f}-{max(v):.0f}" for m, v in wall.items()),
            flush=True,
        )
        for m in modes[1:]:
            summary.append(f"{m}_vs_plain_{n}={rates[m] / rates['plain']:.2f}")
            summary.append(f"{m}_cpu_vs_plain_{n}={costs['plain'] / costs[m]:.2f}")
    print("bench: " + " ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
