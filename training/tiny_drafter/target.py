"""The tiny Qwen3.5 target: tiny-chat's trained attention layers grafted into a Qwen3.5 hybrid
(gated-delta linear-attention layers between them), then fine-tuned on tiny-chat's corpus so the
new layers carry part of the computation.

    nice -n 15 python -m training.tiny_drafter.target --out build/tiny-qwen35/target

Layers 1, 3, 5 are full attention (`full_attention_interval` 2): tiny-chat's layers 0, 1, 2, with
Qwen3.5's output gate zeroed (sigmoid 0 = 1/2, so `o_proj` is doubled: the graft starts out
computing exactly tiny-chat). Layers 0, 2, 4 are new gated-delta layers whose outputs start near
zero. The folder is mlx-vlm's Qwen3.5 layout (a small random vision tower beside the language
model), which mlx-lm loads as a text model; its tokenizer is tiny-chat's plus the vision tokens.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TINY_CHAT = Path("service/assets/tiny-chat")
HIDDEN = 192
LAYERS = 6
HEADS = 4
HEAD_DIM = 48


def text_config(vocab_size: int, eos_token_id: int) -> dict[str, Any]:
    """The language model's config (Qwen3.5 naming; `mtp_num_hidden_layers` declares the head)."""
    return {
        "model_type": "qwen3_5_text",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "intermediate_size": 512,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "head_dim": HEAD_DIM,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": 65536,
        "eos_token_id": eos_token_id,
        "full_attention_interval": 2,
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "linear_conv_kernel_dim": 4,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        # Interleaved M-RoPE over the head's 24 frequencies; on text, plain RoPE (theta 10000).
        "rope_parameters": {
            "type": "default",
            "mrope_section": [8, 8, 8],
            "rope_theta": 10000.0,
            "partial_rotary_factor": 1.0,
        },
    }


def write_skeleton(out: Path, seed: int) -> dict[str, Any]:
    """config.json, tokenizer, processor configs and random weights (vision tower included)."""
    import importlib

    import mlx.core as mx
    from mlx.utils import tree_flatten

    from tests.support.random_qwen3_vl import MAX_PIXELS, MERGE, MIN_PIXELS, PATCH
    from tests.support.random_vlm import _write_tokenizer

    out.mkdir(parents=True, exist_ok=True)
    base = json.loads((TINY_CHAT / "config.json").read_text())
    ids = _write_tokenizer(TINY_CHAT, out, base["vocab_size"])
    vision = 32
    config: dict[str, Any] = {
        "model_type": "qwen3_5",
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vocab_size": base["vocab_size"],
        "eos_token_id": base["eos_token_id"],
        "tie_word_embeddings": True,
        "text_config": text_config(base["vocab_size"], base["eos_token_id"]),
        "vision_config": {
            "model_type": "qwen3_5",
            "depth": 1,
            "hidden_size": vision,
            "intermediate_size": vision * 2,
            "out_hidden_size": HIDDEN,
            "num_heads": 2,
            "in_channels": 3,
            "patch_size": PATCH,
            "spatial_patch_size": PATCH,
            "spatial_merge_size": MERGE,
            "temporal_patch_size": 2,
            "num_position_embeddings": 16,
            "deepstack_visual_indexes": [],
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    processor = {
        "image_processor_type": "Qwen2VLImageProcessorFast",
        "processor_class": "Qwen3VLProcessor",
        "patch_size": PATCH,
        "temporal_patch_size": 2,
        "merge_size": MERGE,
        "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    for name in ("preprocessor_config.json", "video_preprocessor_config.json"):
        (out / name).write_text(json.dumps(processor, indent=2) + "\n")
    (out / "processor_config.json").write_text(
        json.dumps({"processor_class": "Qwen3VLProcessor"}, indent=2) + "\n"
    )
    module = importlib.import_module("mlx_vlm.models.qwen3_5")
    mx.random.seed(seed)
    model = module.Model(module.ModelConfig.from_dict(json.loads(json.dumps(config))))
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    generation = {"eos_token_id": base["eos_token_id"], "do_sample": False, "temperature": 0.0}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    return config


def graft(model: Any, seed: int, new_scale: float) -> None:
    """tiny-chat's weights into the full-attention layers, small outputs from the new ones."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    src = mx.load(str(TINY_CHAT / "model.safetensors"))
    lm = model.language_model.model
    lm.embed_tokens.weight = src["model.embed_tokens.weight"]
    lm.norm.weight = src["model.norm.weight"]
    for i in range(3):
        layer = lm.layers[2 * i + 1]
        p = f"model.layers.{i}."
        attn = layer.self_attn
        q = src[p + "self_attn.q_proj.weight"].reshape(HEADS, HEAD_DIM, HIDDEN)
        attn.q_proj.weight = mx.concatenate([q, mx.zeros_like(q)], axis=1).reshape(-1, HIDDEN)
        attn.k_proj.weight = src[p + "self_attn.k_proj.weight"]
        attn.v_proj.weight = src[p + "self_attn.v_proj.weight"]
        attn.o_proj.weight = 2.0 * src[p + "self_attn.o_proj.weight"]
        attn.q_norm.weight = src[p + "self_attn.q_norm.weight"]
        attn.k_norm.weight = src[p + "self_attn.k_norm.weight"]
        layer.input_layernorm.weight = src[p + "input_layernorm.weight"]
        layer.post_attention_layernorm.weight = src[p + "post_attention_layernorm.weight"]
        for name in ("gate_proj", "up_proj", "down_proj"):
            getattr(layer.mlp, name).weight = src[p + f"mlp.{name}.weight"]
    mx.random.seed(seed)
    for i in (0, 2, 4):
        layer = lm.layers[i]
        layer.linear_attn.out_proj.weight = new_scale * layer.linear_attn.out_proj.weight
        layer.mlp.down_proj.weight = new_scale * layer.mlp.down_proj.weight
    mx.eval(dict(tree_flatten(model.parameters())))


def conversations(n: int, seed: int, max_len: int, tok: Any) -> list[tuple[list[int], list[int]]]:
    """tiny-chat's training conversations (its full mix): token ids and target indices."""
    from training.tiny_chat.data import FULL_MIX, train_conversations
    from training.tiny_chat.template import compile_template
    from training.tiny_chat.train import conversation_example

    template = compile_template()
    out = []
    for conv in train_conversations(n, seed=seed, mix=FULL_MIX):
        try:
            ids, targets = conversation_example(conv, template, tok)
        except RuntimeError:
            continue
        if len(ids) <= max_len and targets:
            out.append((ids, targets))
    return out


def batches(examples: list[tuple[list[int], list[int]]], batch: int, seed: int):
    """Endless batches of similar length: (tokens, target positions mask)."""
    import mlx.core as mx
    import numpy as np

    rng = random.Random(seed)
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    groups = [order[i : i + batch] for i in range(0, len(order), batch)]
    while True:
        rng.shuffle(groups)
        for g in groups:
            t = max(len(examples[i][0]) for i in g)
            toks = np.zeros((len(g), t), dtype=np.int32)
            mask = np.zeros((len(g), t), dtype=np.float32)
            for r, i in enumerate(g):
                ids, targets = examples[i]
                toks[r, : len(ids)] = ids
                for j in targets:
                    if j > 0:
                        mask[r, j - 1] = 1.0  # the output at j-1 predicts token j
            yield mx.array(toks), mx.array(mask)


def train(model: Any, examples, *, steps: int, batch: int, lr: float, seed: int) -> None:
    import mlx.core as mx
    import mlx.optimizers as optim
    from mlx import nn

    lm = model.language_model
    lm.train()

    def loss_fn(m: Any, toks: mx.array, mask: mx.array) -> mx.array:
        logits = m(toks[:, :-1])
        ce = nn.losses.cross_entropy(logits, toks[:, 1:]) * mask[:, :-1]
        return ce.sum() / mx.maximum(mask.sum(), 1.0)

    warmup = max(1, steps // 10)

    def schedule(step: mx.array) -> mx.array:
        s = step.astype(mx.float32)
        cos = 0.5 * (1 + mx.cos(math.pi * mx.minimum(s / steps, 1.0)))
        return lr * mx.minimum((s + 1) / warmup, 1.0) * (0.1 + 0.9 * cos)

    opt = optim.AdamW(learning_rate=schedule, weight_decay=0.0)
    step_fn = nn.value_and_grad(lm, loss_fn)
    it = batches(examples, batch, seed)
    start = time.perf_counter()
    for step in range(steps):
        toks, mask = next(it)
        loss, grads = step_fn(lm, toks, mask)
        opt.update(lm, grads)
        mx.eval(lm.parameters(), opt.state, loss)
        if step % 25 == 0 or step == steps - 1:
            log.info("step %d loss %.4f (%.0f s)", step, loss.item(), time.perf_counter() - start)
    lm.eval()


def save(out: Path, tensors: dict[str, Any]) -> None:
    """Replaces (or adds) `tensors` in out/model.safetensors (float32, MLX layout, so neither
    mlx-lm nor mlx-vlm shifts its norms)."""
    import mlx.core as mx

    weights = dict(mx.load(str(out / "model.safetensors")))
    weights.update({k: v.astype(mx.float32) for k, v in tensors.items()})
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--conversations", type=int, default=3000)
    parser.add_argument("--max-len", type=int, default=320)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--new-scale", type=float, default=1.0, help="the new layers' output projections, scaled"
    )
    parser.add_argument("--eval", type=int, default=0, help="held-out prompts per behaviour")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from mlx_responses.service.engine.blas import preload_blas

    log.info("BLAS: %s", preload_blas())
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import load_model
    from tokenizers import Tokenizer

    mx.random.seed(args.seed)
    write_skeleton(args.out, args.seed)
    model, _ = load_model(args.out)
    graft(model, args.seed, args.new_scale)
    tok = Tokenizer.from_file(str(TINY_CHAT / "tokenizer.json"))
    examples = conversations(args.conversations, args.seed + 7, args.max_len, tok)
    log.info("%d conversations", len(examples))
    train(model, examples, steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed)
    save(args.out, dict(tree_flatten(model.parameters())))
    log.info("wrote %s", args.out)
    if args.eval:
        from training.tiny_chat.evaluate import evaluate, summarize
        from training.tiny_drafter.own import load_target

        model, tokenizer = load_target(args.out)
        log.info("held-out: %s", summarize(evaluate(model, tokenizer, n=args.eval)))


if __name__ == "__main__":
    main()
