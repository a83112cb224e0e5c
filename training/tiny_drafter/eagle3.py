"""Trains an EAGLE-3 drafter for the tiny Qwen3.5 target on the target's own generations and
writes it as mlx-vlm's `eagle3` folder (config.json + model.safetensors).

    nice -n 15 python -m training.tiny_drafter.eagle3 --target service/assets/tiny-qwen35-mtp \
        --out service/assets/tiny-qwen35-eagle3

The drafter is mlx-vlm's `Eagle3DraftModel` itself: `fc` over the target's hidden states after
layers CAPTURE (a linear-attention, a full-attention and the last linear-attention layer,
concatenated), then one decoder layer whose attention sees [norm(token embedding), norm(hidden)];
it shares the target's embeddings and head (tied). Loss: the next-next token (depth 1) and, from
its own output fed back, the one after (depth 2), as mtp.py.
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

CAPTURE = [1, 3, 4]  # layer outputs (0-based) the drafter reads: mlx-vlm's capture_layer_ids


def drafter_config(target_dir: Path) -> dict[str, Any]:
    text = json.loads((target_dir / "config.json").read_text())["text_config"]
    return {
        "model_type": "eagle3",
        "speculators_model_type": "eagle3",
        "architectures": ["Eagle3Speculator"],
        "transformer_layer_config": {
            "model_type": "llama",
            "hidden_size": text["hidden_size"],
            "intermediate_size": text["intermediate_size"],
            "num_hidden_layers": 1,
            "num_attention_heads": text["num_attention_heads"],
            "num_key_value_heads": text["num_key_value_heads"],
            "head_dim": text["head_dim"],
            "rms_norm_eps": text["rms_norm_eps"],
            "vocab_size": text["vocab_size"],
            "max_position_embeddings": text["max_position_embeddings"],
            "rope_theta": text["rope_parameters"]["rope_theta"],
            "tie_word_embeddings": True,
        },
        "draft_vocab_size": text["vocab_size"],
        "target_hidden_size": text["hidden_size"],
        "tie_word_embeddings": True,
        "norm_before_residual": False,
        "target_layer_ids": [i + 1 for i in CAPTURE],
        "capture_layer_ids": CAPTURE,
        "block_size": 3,
    }


def captured(inner: Any, toks: Any) -> Any:
    """The target's hidden states after the CAPTURE layers, concatenated (mlx-lm's forward)."""
    import mlx.core as mx
    from mlx_lm.models.base import create_attention_mask

    h = inner.embed_tokens(toks)
    fa_mask = create_attention_mask(h, None)
    out = []
    for i, layer in enumerate(inner.layers):
        h = layer(h, mask=None if layer.is_linear else fa_mask, cache=None)
        if i in CAPTURE:
            out.append(h)
    return mx.concatenate(out, axis=-1)


def make_drafter(target_dir: Path, target: Any, seed: int) -> Any:
    """mlx-vlm's EAGLE-3 drafter, its MLP and norms from the target's last full-attention
    layer, its embeddings the target's."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.speculative.drafters.eagle3 import Model, ModelConfig

    mx.random.seed(seed)
    drafter = Model(ModelConfig.from_dict(drafter_config(target_dir)))
    inner = target.language_model.model
    last = inner.layers[-1]
    mine = dict(tree_flatten(drafter.layers[0].parameters()))
    theirs = [
        (k, v)
        for k, v in tree_flatten(last.parameters())
        if k in mine and mine[k].shape == v.shape and "q_proj" not in k
    ]
    drafter.layers[0].load_weights(theirs, strict=False)
    drafter.embed_tokens.weight = inner.embed_tokens.weight
    drafter.norm.weight = inner.norm.weight
    mx.eval(drafter.parameters())
    return drafter


def drafter_loss(
    drafter: Any, toks: Any, hidden: Any, picked: tuple[Any, Any], *, depth2: float
) -> Any:
    """As mtp.head_loss, through the EAGLE-3 layer (positions start at 1, as mlx-vlm's)."""
    import mlx.core as mx
    from mlx import nn

    b, _ = toks.shape
    layer = drafter.layers[0]
    embed = drafter.embed_tokens
    d = drafter.hidden_size
    out = layer(embed(toks[:, 1:]), drafter.fc(hidden[:, :-1]), "causal", None, 1)
    wanted = mx.concatenate([toks[:, 2:], mx.zeros((b, 1), dtype=toks.dtype)], axis=1)
    logits = drafter._logits(out.reshape(-1, d)[picked[0]])
    loss = nn.losses.cross_entropy(logits, wanted.reshape(-1)[picked[0]]).mean()
    if depth2 > 0:
        nxt = mx.concatenate([toks[:, 2:], toks[:, -1:]], axis=1)
        out2 = layer(embed(nxt), out, "causal", None, 2)
        wanted2 = mx.concatenate([toks[:, 3:], mx.zeros((b, 2), dtype=toks.dtype)], axis=1)
        logits2 = drafter._logits(out2.reshape(-1, d)[picked[1]])
        loss = (
            loss + depth2 * nn.losses.cross_entropy(logits2, wanted2.reshape(-1)[picked[1]]).mean()
        )
    return loss


def train_drafter(
    drafter: Any,
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
    prepared = []
    for g in groups:
        toks, mask = padded(g)
        hidden = captured(inner, toks)
        cut = max(0, min(start for _, start in g) - context)  # as mtp.train_head
        toks, mask, hidden = toks[:, cut:], mask[:, cut:], hidden[:, cut:]
        mx.eval(hidden)
        prepared.append((toks, (picks(mask, 1), picks(mask, 2)), hidden))
    log.info("captured hidden states of %d sequences", len(data))
    drafter.freeze(keys=["embed_tokens"], recurse=False)
    warmup = max(1, steps // 20)
    schedule = optim.join_schedules(
        [optim.linear_schedule(1e-7, lr, warmup), optim.cosine_decay(lr, steps, lr * 0.05)],
        [warmup],
    )
    opt = optim.AdamW(learning_rate=schedule, weight_decay=0.0)
    step_fn = nn.value_and_grad(drafter, lambda m, t, h, k: drafter_loss(m, t, h, k, depth2=depth2))
    start = time.perf_counter()
    for step in range(steps):
        toks, picked, hidden = prepared[rng.randrange(len(prepared))]
        loss, grads = step_fn(drafter, toks, hidden, picked)
        opt.update(drafter, grads)
        mx.eval(drafter.trainable_parameters(), opt.state, loss)
        if step % 10 == 0 or step == steps - 1:
            log.info("step %d loss %.4f (%.0f s)", step, loss.item(), time.perf_counter() - start)
    drafter.unfreeze()


def write_drafter(out: Path, target_dir: Path, drafter: Any) -> None:
    import mlx.core as mx
    from mlx.utils import tree_flatten

    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.astype(mx.float32) for k, v in tree_flatten(drafter.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    config = drafter_config(target_dir)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--data", type=Path, default=Path("build/tiny-qwen35/own.json"), help="generations"
    )
    parser.add_argument("--prompts", type=int, default=160)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--steps", type=int, default=400)
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
    drafter = make_drafter(args.target, target, args.seed)
    train_drafter(
        drafter,
        target,
        data,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        depth2=args.depth2,
        seed=args.seed,
        context=args.context,
    )
    write_drafter(args.out, args.target, drafter)
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
