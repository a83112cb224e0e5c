"""What the two drafter trainers (mtp.py, eagle3.py) share: their flags, the target loaded with
its own generations, the batches of target hidden states they train on, and the optimizer."""

from __future__ import annotations

import argparse
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.tiny_drafter.own import Sequence, load_target, own_generations, padded, picks

log = logging.getLogger(__name__)

# One batch: ids, the flat positions whose depth-1 and depth-2 targets are continuation tokens
# (`own.picks`), and the target's hidden states the drafter reads.
Batch = tuple[Any, tuple[Any, Any], Any]


@dataclass(frozen=True)
class Recipe:
    """How a drafter trains (the flags of the same names)."""

    steps: int
    batch: int
    lr: float
    depth2: float
    seed: int
    context: int

    @classmethod
    def of(cls, args: argparse.Namespace) -> Recipe:
        """The recipe `arguments()` parsed."""
        return cls(args.steps, args.batch, args.lr, args.depth2, args.seed, args.context)


def arguments(description: str | None, *, steps: int) -> argparse.ArgumentParser:
    """The flags both trainers take (`steps`: this trainer's default number of steps)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument(
        "--data", type=Path, default=Path("build/tiny-qwen35/own.json"), help="generations"
    )
    parser.add_argument("--prompts", type=int, default=160)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--depth2", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context", type=int, default=48, help="prompt tokens kept in training")
    return parser


def start(args: argparse.Namespace) -> tuple[Any, list[Sequence]]:
    """Logging and BLAS set up, the target loaded, and its own generations (made or read)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from mlx_responses.service.engine.blas import preload_blas

    log.info("BLAS: %s", preload_blas())
    target, tokenizer = load_target(args.target)
    data = own_generations(
        target,
        tokenizer,
        args.data,
        prompts=args.prompts,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    log.info("%d continuations, %d tokens", len(data), sum(len(s) - p for s, p in data))
    return target, data


def batches(data: list[Sequence], recipe: Recipe, hidden: Callable[[Any], Any]) -> list[Batch]:
    """`data` in batches of similar length with `hidden(ids)` computed once each, cut to the
    continuations and the last `recipe.context` prompt tokens before them: RoPE is relative, so
    the drafter sees what it sees at inference minus the far prompt (which keeps steps cheap)."""
    import mlx.core as mx

    order = sorted(range(len(data)), key=lambda i: len(data[i][0]))
    size = recipe.batch
    groups = [[data[i] for i in order[k : k + size]] for k in range(0, len(order), size)]
    out = []
    for g in groups:
        toks, mask = padded(g)
        states = hidden(toks)
        cut = max(0, min(start for _, start in g) - recipe.context)
        toks, mask, states = toks[:, cut:], mask[:, cut:], states[:, cut:]
        mx.eval(states)
        out.append((toks, (picks(mask, 1), picks(mask, 2)), states))
    log.info("hidden states of %d sequences ready", len(data))
    return out


def train(model: Any, loss: Callable[..., Any], prepared: list[Batch], recipe: Recipe) -> None:
    """`recipe.steps` AdamW steps on `model`'s trainable parameters, each on a batch drawn at
    random (seeded) from `prepared`: `loss(model, ids, picked, hidden)`. The learning rate warms
    up linearly over the first 5% of the steps, then decays (cosine) to 5%."""
    import mlx.core as mx
    import mlx.optimizers as optim
    from mlx import nn

    lr, steps = recipe.lr, recipe.steps
    warmup = max(1, steps // 20)
    schedule = optim.join_schedules(
        [optim.linear_schedule(1e-7, lr, warmup), optim.cosine_decay(lr, steps, lr * 0.05)],
        [warmup],
    )
    opt = optim.AdamW(learning_rate=schedule, weight_decay=0.0)
    step_fn = nn.value_and_grad(model, loss)
    rng = random.Random(recipe.seed)
    begun = time.perf_counter()
    for step in range(steps):
        toks, picked, hidden = prepared[rng.randrange(len(prepared))]
        value, grads = step_fn(model, toks, picked, hidden)
        opt.update(model, grads)
        mx.eval(model.trainable_parameters(), opt.state, value)
        if step % 10 == 0 or step == steps - 1:
            log.info("step %d loss %.4f (%.0f s)", step, value.item(), time.perf_counter() - begun)
