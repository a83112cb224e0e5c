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

import json
import logging
from pathlib import Path
from typing import Any

from training.tiny_drafter.own import Sequence
from training.tiny_drafter.recipe import Recipe, arguments, batches, start, train

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


def train_head(head: Any, target: Any, data: list[Sequence], recipe: Recipe) -> None:
    """The head trained on the target's final hidden states (after its last norm, as mlx-vlm
    hands them to the head)."""
    inner = target.language_model.model
    prepared = batches(data, recipe, inner)
    head.train()
    train(
        head,
        lambda m, t, k, h: head_loss(m, inner.embed_tokens, h, t, k, depth2=recipe.depth2),
        prepared,
        recipe,
    )
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
    args = arguments(__doc__, steps=1500).parse_args()
    target, data = start(args)
    head = make_head(args.target, target, args.seed)
    train_head(head, target, data, Recipe.of(args))
    write_head(args.target, head)
    log.info("wrote the head into %s", args.target)


if __name__ == "__main__":
    main()
