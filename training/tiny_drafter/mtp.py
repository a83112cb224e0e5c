"""Trains the tiny Qwen3.5 target's own MTP head on the target's own generations, and writes it
into the checkpoint as Qwen3.5 ships it: `mtp.*` tensors beside the model's, the config saying
`mtp_num_hidden_layers: 1`.

    nice -n 15 python -m training.tiny_drafter.mtp --target build/tiny-qwen35/target

The head is mlx-vlm's `Qwen3_5MTPDraftModel` itself (one full-attention Qwen3.5 layer after `fc`
over [norm(embedding of token t+1), norm(target hidden at t)]), so training computes exactly what
`mlx_vlm.server --draft-kind mtp` runs. Data: the target's continuations of tiny-chat's training
prompts, greedy and sampled at temperature 0.7. Loss: the next-next token (depth 1), plus the
token after that from the head's own output fed back as the hidden (depth 2: what the second
draft of a round sees).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path
from typing import Any

from training.tiny_drafter.own import Sequence, load_target, own_generations, padded, picks

log = logging.getLogger(__name__)


def make_head(target_dir: Path, target: Any, seed: int) -> Any:
    """mlx-vlm's Qwen3.5 MTP drafter for the target's config, started from the target's last
    full-attention layer and final norm, `fc` passing the hidden state through."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.speculative.drafters.qwen3_5_mtp import Model, ModelConfig

    text = json.loads((target_dir / "config.json").read_text())["text_config"]
    head = Model(ModelConfig.from_dict({"model_type": "qwen3_5_mtp", "text_config": text}))
    inner = target.language_model.model
    last = inner.layers[-1]
    mine = dict(tree_flatten(head.layers[0].parameters()))
    theirs = [(k, v) for k, v in tree_flatten(last.parameters()) if k in mine]
    head.layers[0].load_weights(theirs, strict=False)
    head.norm.weight = inner.norm.weight
    d = text["hidden_size"]
    mx.random.seed(seed)
    head.fc.weight = mx.concatenate([0.02 * mx.random.normal((d, d)), mx.eye(d)], axis=1).astype(
        mx.float32
    )
    mx.eval(head.parameters())
    return head


def head_loss(
    head: Any, embed: Any, hidden: Any, toks: Any, picked: tuple[Any, Any], *, depth2: float
) -> Any:
    """Cross-entropy of the head's next-next token (and, weighted `depth2`, the one after, from
    its own output hidden), over the continuation's positions (`picked`: see `picks`)."""
    import mlx.core as mx
    from mlx import nn

    b, t = toks.shape
    d = hidden.shape[-1]
    pos = mx.broadcast_to(mx.arange(t - 1)[None], (b, t - 1))
    # Output i: from the target's hidden at i (which produced token i+1) and token i+1's
    # embedding; it predicts token i+2.
    out = head._forward_hidden(embed(toks[:, 1:]), hidden[:, :-1], None, pos)
    flat = out.reshape(-1, d)[picked[0]]
    wanted = toks[:, 2:]
    wanted = mx.concatenate([wanted, mx.zeros((b, 1), dtype=wanted.dtype)], axis=1)
    loss = nn.losses.cross_entropy(embed.as_linear(flat), wanted.reshape(-1)[picked[0]]).mean()
    if depth2 > 0:
        # Output i fed back as the hidden beside token i+2's embedding, at position i+1 (the
        # round's second draft): predicts token i+3.
        nxt = mx.concatenate([toks[:, 2:], toks[:, -1:]], axis=1)
        out2 = head._forward_hidden(embed(nxt), out, None, pos + 1)
        wanted2 = mx.concatenate([toks[:, 3:], mx.zeros((b, 2), dtype=toks.dtype)], axis=1)
        flat2 = out2.reshape(-1, d)[picked[1]]
        ce2 = nn.losses.cross_entropy(embed.as_linear(flat2), wanted2.reshape(-1)[picked[1]])
        loss = loss + depth2 * ce2.mean()
    return loss


def train_head(
    head: Any,
    target: Any,
    data: list[Sequence],
    *,
    steps: int,
    batch: int,
    lr: float,
    depth2: float,
    seed: int,
    context: int,
) -> None:
    import mlx.core as mx
    import mlx.optimizers as optim
    from mlx import nn

    inner = target.language_model.model
    rng = random.Random(seed)
    order = sorted(range(len(data)), key=lambda i: len(data[i][0]))
    groups = [[data[i] for i in order[k : k + batch]] for k in range(0, len(order), batch)]
    # The target's final hidden states (after its last norm, as mlx-vlm hands them to the head).
    prepared = []
    for g in groups:
        toks, mask = padded(g)
        hidden = inner(toks)
        # The continuations and the end of their prompts: RoPE is relative, so the head sees
        # what it sees at inference minus the far prompt (which keeps the steps cheap).
        cut = max(0, min(start for _, start in g) - context)
        toks, mask, hidden = toks[:, cut:], mask[:, cut:], hidden[:, cut:]
        mx.eval(hidden)
        prepared.append((toks, (picks(mask, 1), picks(mask, 2)), hidden))
    log.info("hidden states of %d sequences ready", len(data))

    warmup = max(1, steps // 20)
    schedule = optim.join_schedules(
        [optim.linear_schedule(1e-7, lr, warmup), optim.cosine_decay(lr, steps, lr * 0.05)],
        [warmup],
    )
    opt = optim.AdamW(learning_rate=schedule, weight_decay=0.0)
    step_fn = nn.value_and_grad(
        head, lambda m, t, k, h: head_loss(m, inner.embed_tokens, h, t, k, depth2=depth2)
    )
    start = time.perf_counter()
    head.train()
    for step in range(steps):
        toks, picked, hidden = prepared[rng.randrange(len(prepared))]
        loss, grads = step_fn(head, toks, picked, hidden)
        opt.update(head, grads)
        mx.eval(head.parameters(), opt.state, loss)
        if step % 10 == 0 or step == steps - 1:
            log.info("step %d loss %.4f (%.0f s)", step, loss.item(), time.perf_counter() - start)
    head.eval()


def write_head(target_dir: Path, head: Any) -> None:
    """The head's tensors as `mtp.*` in the checkpoint, `mtp_num_hidden_layers` in its config."""
    from mlx.utils import tree_flatten

    from training.tiny_drafter.target import save

    save(target_dir, {f"mtp.{k}": v for k, v in tree_flatten(head.parameters())})
    config = json.loads((target_dir / "config.json").read_text())
    config["text_config"]["mtp_num_hidden_layers"] = len(head.layers)
    (target_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument(
        "--data", type=Path, default=Path("build/tiny-qwen35/own.json"), help="generations"
    )
    parser.add_argument("--prompts", type=int, default=160)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--depth2", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context", type=int, default=48, help="prompt tokens kept in training")
    args = parser.parse_args()
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
    head = make_head(args.target, target, args.seed)
    train_head(
        head,
        target,
        data,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        depth2=args.depth2,
        seed=args.seed,
        context=args.context,
    )
    write_head(args.target, head)
    log.info("wrote the head into %s", args.target)


if __name__ == "__main__":
    main()
