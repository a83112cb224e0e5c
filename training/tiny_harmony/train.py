"""Trains the tiny gpt-oss (mlx-lm's gpt_oss architecture) on harmony conversations, from
scratch on the CPU, and writes an mlx-lm model folder (service/assets/tiny-gpt-oss).

    nice -n 15 python -m training.tiny_harmony.train --out service/assets/tiny-gpt-oss

Only the assistant turn to learn is in the loss. Training stops after `--cpu-seconds` of this
process's CPU time (not wall time: the machine is shared) or `--steps`, whichever comes first.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any

from training.tiny_chat.agent import work_dir
from training.tiny_harmony import agent_tools, codex
from training.tiny_harmony.data import Example, example
from training.tiny_harmony.tokenizer import write_tokenizer

log = logging.getLogger(__name__)

CONFIG: dict[str, Any] = {
    "model_type": "gpt_oss",
    "hidden_size": 64,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"],
    "rms_norm_eps": 1e-5,
    "rope_theta": 150000,
    # gpt-oss's own: Codex's default request (~18.7k tokens) fits, and transformers' config
    # check (its yarn factor 32 over 4,096) stays quiet. mlx-lm's RoPE does not read it.
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}


def encode(tokenizer: Any, ex: Example) -> tuple[list[int], int]:
    """The conversation's ids and where the turn to learn starts."""
    last = max(i for i, m in enumerate(ex.messages) if m["role"] != "assistant")
    kwargs = {"tools": ex.tools, "tokenize": False, "current_date": ex.date}
    prompt = tokenizer.apply_chat_template(
        ex.messages[: last + 1], add_generation_prompt=True, **kwargs
    )
    full = tokenizer.apply_chat_template(ex.messages, **kwargs)
    if not full.startswith(prompt):
        raise ValueError("the prompt is not a prefix of the conversation")
    head = tokenizer.encode(prompt, add_special_tokens=False)
    return head + tokenizer.encode(full[len(prompt) :], add_special_tokens=False), len(head)


def padded(rows: list[tuple[list[int], int]]) -> tuple[Any, Any, Any]:
    """Inputs, targets and the loss mask (the learned turn only) of rows padded to one width."""
    import mlx.core as mx

    width = max(len(ids) for ids, _ in rows)
    inputs, targets, mask = [], [], []
    for ids, start in rows:
        pad = width - len(ids)
        inputs.append(ids[:-1] + [0] * pad)
        targets.append(ids[1:] + [0] * pad)
        mask.append([0] * (start - 1) + [1] * (len(ids) - start) + [0] * pad)
    return mx.array(inputs), mx.array(targets), mx.array(mask, dtype=mx.float32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=1800)
    parser.add_argument("--cpu-seconds", type=float, default=840.0)
    parser.add_argument("--wall-seconds", type=float, default=2100.0)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init-from", type=Path, help="continue from these weights")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument(
        "--stop-after",
        type=int,
        help="end after this many steps (the schedule "
        "still spans --steps): the committed run stopped at 741",
    )
    parser.add_argument(
        "--agents",
        type=float,
        default=0.0,
        help="the share of conversations on the compatibility test's tool shapes "
        "(agent_tools.py); the rest are data.py's",
    )
    parser.add_argument(
        "--codex-every",
        type=int,
        default=0,
        help="every Nth step learns Codex turns behind its system turn (prefixed.py); 0: never",
    )
    parser.add_argument("--codex-batch", type=int, default=4)
    parser.add_argument(
        "--max-position",
        type=int,
        default=CONFIG["max_position_embeddings"],
        help="the context the config declares",
    )
    parser.add_argument(
        "--codex-context",
        action="store_true",
        help="cache the environment context with the system turn (one work dir per prefill): "
        "a Codex step learns only the request and the answer, ~4x cheaper",
    )
    parser.add_argument(
        "--codex-wide-words",
        action="store_true",
        help="Codex turns echo codex.WIDE_WORDS (~75 words) rather than ECHO_WORDS (16)",
    )
    parser.add_argument(
        "--insert-sliding",
        type=int,
        help="grow --init-from's model by a sliding-attention layer at this index, its outputs "
        "zero (the model computes what it did), so a copy can happen inside the window",
    )
    parser.add_argument(
        "--train-only-new",
        action="store_true",
        help="with --insert-sliding: learn the new layer only, the others frozen as loaded",
    )
    parser.add_argument(
        "--distill",
        action="store_true",
        help="with --init-from: the short conversations' steps learn the loaded model's own "
        "next-token distributions (KL on the learned turn) instead of the data's tokens, so "
        "what it did there stays as it was while Codex steps teach the rest",
    )
    parser.add_argument(
        "--distill-weight",
        type=float,
        default=0.0,
        help="with --distill: every Codex step also learns a batch of short conversations' "
        "KL, times this (one objective, so Adam does not drown the small KL steps)",
    )
    parser.add_argument(
        "--teacher", type=Path, help="--distill's model (default: --init-from's weights)"
    )
    parser.add_argument(
        "--train-layer", type=int, help="learn this layer only, the others frozen as loaded"
    )
    parser.add_argument("--verbose", action="store_true", help="log every step")
    parser.add_argument("--save-every", type=int, default=0, help="write the weights every N steps")
    parser.add_argument(
        "--keep-checkpoints",
        action="store_true",
        help="with --save-every: also copy each save to OUT-STEP beside --out",
    )
    parser.add_argument(
        "--codex-refresh", type=int, default=3, help="Codex steps between system-turn prefills"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from mlx_responses.service.engine.blas import preload_blas

    log.info("BLAS: %s", preload_blas())  # before mlx loads: ~3x faster steps on this CPU
    import mlx.core as mx
    import mlx.optimizers as optim
    from mlx import nn
    from mlx_lm.models import gpt_oss
    from mlx_responses.service.config import BUNDLED_MODEL
    from transformers import AutoTokenizer

    from training.tiny_harmony import prefixed

    mx.set_default_device(mx.cpu)
    write_tokenizer(BUNDLED_MODEL, args.out)
    tokenizer = AutoTokenizer.from_pretrained(str(args.out))
    config = {
        **CONFIG,
        "max_position_embeddings": args.max_position,
        "vocab_size": json.loads((BUNDLED_MODEL / "config.json").read_text())["vocab_size"],
    }
    if args.init_from is not None:
        config["layer_types"] = json.loads((args.init_from / "config.json").read_text())[
            "layer_types"
        ]
    if args.insert_sliding is not None:
        config["layer_types"] = list(config["layer_types"])
        config["layer_types"].insert(args.insert_sliding, "sliding_attention")
    config["num_hidden_layers"] = len(config["layer_types"])
    mx.random.seed(args.seed)
    model = gpt_oss.Model(gpt_oss.ModelArgs.from_dict(config))
    if args.init_from is not None:
        weights = mx.load(str(args.init_from / "model.safetensors"))
        if args.insert_sliding is not None:
            weights = grown(model, weights, args.insert_sliding)
        model.load_weights(list(weights.items()))
    if args.train_only_new:
        args.train_layer = args.insert_sliding
    if args.train_layer is not None:
        model.freeze()
        model.model.layers[args.train_layer].unfreeze()
    teacher = None
    if args.distill:
        source = args.teacher or args.init_from
        teacher_config = json.loads((source / "config.json").read_text())
        teacher = gpt_oss.Model(gpt_oss.ModelArgs.from_dict(teacher_config))
        teacher.load_weights(str(source / "model.safetensors"))
        teacher.freeze()
    rng = random.Random(args.seed)

    def draw() -> Example:
        # (no draw when 0: the first stage's stream stays the committed run's)
        if args.agents and rng.random() < args.agents:
            return agent_tools.example(
                rng, f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            )
        return example(rng)

    def batch() -> tuple[mx.array, mx.array, mx.array]:
        return padded([encode(tokenizer, draw()) for _ in range(args.batch)])

    def loss_fn(
        model: nn.Module, x: mx.array, y: mx.array, m: mx.array, cache: Any = None
    ) -> mx.array:
        logits = model(x, cache=cache)
        losses = nn.losses.cross_entropy(logits, y, reduction="none")
        return (losses * m).sum() / m.sum()

    def distill_fn(model: nn.Module, x: mx.array, want: mx.array, m: mx.array) -> mx.array:
        """KL(the loaded model's distribution || this one's) on the learned turn."""
        logits = model(x)
        mine = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        kl = (mx.exp(want) * (want - mine)).sum(axis=-1)
        return (kl * m).sum() / m.sum()

    system: dict[str, Any] = {}
    words = codex.WIDE_WORDS if args.codex_wide_words else codex.ECHO_WORDS

    def codex_batch(codex_step: int) -> tuple[mx.array, mx.array, mx.array, list[Any]]:
        """Codex turns behind one system turn (prefilled again every --codex-refresh)."""
        if codex_step % args.codex_refresh == 0:
            date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            home = codex.home_dir(rng)
            where = None
            if args.codex_context:  # the environment context joins the cached prefix
                cwd = work_dir(rng)
                where = (cwd, codex.context(rng, cwd, date))
            text = prefixed.system_turn(tokenizer, date, home, None if where is None else where[1])
            system.update(date=date, home=home, text=text, where=where)
            system["cache"] = prefixed.prefill(model, tokenizer, text)
        turns = [
            codex.turn(rng, system["date"], system["home"], words, where=system["where"])
            for _ in range(args.codex_batch)
        ]
        rows = [prefixed.encode_turn(tokenizer, t, system["text"]) for t in turns]
        x, y, m = padded(rows)
        return x, y, m, prefixed.copies(system["cache"], args.codex_batch)

    schedule = optim.join_schedules(
        [
            optim.linear_schedule(1e-5, args.lr, args.warmup),
            optim.cosine_decay(args.lr, args.steps, 1e-4),
        ],
        [args.warmup],
    )
    optimizer = optim.AdamW(learning_rate=schedule, weight_decay=0.01)
    step_fn = nn.value_and_grad(model, loss_fn)
    distill_step = nn.value_and_grad(model, distill_fn)

    def joint_fn(model: nn.Module, rows: Any, short: Any) -> mx.array:
        """A Codex batch's loss plus --distill-weight times a short batch's KL."""
        return loss_fn(model, *rows) + args.distill_weight * distill_fn(model, *short)

    joint_step = nn.value_and_grad(model, joint_fn)

    def short_batch() -> tuple[mx.array, mx.array, mx.array]:
        assert teacher is not None
        x, _, m = batch()
        logits = teacher(x)
        return x, mx.stop_gradient(logits - mx.logsumexp(logits, axis=-1, keepdims=True)), m

    started, wall = time.process_time(), time.time()
    step = 0
    codex_steps = 0
    for step in range(1, (args.stop_after or args.steps) + 1):
        if args.codex_every and step % args.codex_every == 0:
            x, y, m, cache = codex_batch(codex_steps)
            codex_steps += 1
            if args.distill_weight:
                loss, grads = joint_step(model, (x, y, m, cache), short_batch())
            else:
                loss, grads = step_fn(model, x, y, m, cache)
        elif teacher is not None:
            loss, grads = distill_step(model, *short_batch())
        else:
            x, y, m = batch()
            loss, grads = step_fn(model, x, y, m)
        optimizer.update(model, grads)
        mx.eval(model.parameters(), optimizer.state, loss)
        if step % 100 == 0 or args.verbose:
            log.info(
                "step %d loss %.4f cpu %.0fs", step, loss.item(), time.process_time() - started
            )
        if args.save_every and step % args.save_every == 0:
            save(model, config, args.out)
            if args.keep_checkpoints:
                kept = args.out.parent / f"{args.out.name}-{step}"
                shutil.copytree(args.out, kept, dirs_exist_ok=True)
        if (
            time.process_time() - started > args.cpu_seconds
            or time.time() - wall > args.wall_seconds
        ):
            break
    log.info(
        "trained %d steps, %.0f s CPU, %.0f s wall",
        step,
        time.process_time() - started,
        time.time() - wall,
    )
    save(model, config, args.out)


def grown(model: Any, weights: dict[str, Any], at: int) -> dict[str, Any]:
    """``weights`` of a model one layer shorter, for ``model`` with a new layer at ``at``: the
    layers from ``at`` on move up one, the new layer keeps its random init but for its attention
    and experts' output projections, zero, so it adds nothing to the residual until trained."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    out: dict[str, Any] = {}
    for key, value in weights.items():
        parts = key.split(".")
        if key.startswith("model.layers.") and int(parts[2]) >= at:
            parts[2] = str(int(parts[2]) + 1)
        out[".".join(parts)] = value
    prefix = f"model.layers.{at}."
    for key, value in tree_flatten(model.parameters()):
        if key.startswith(prefix):
            zero = ".o_proj." in key or ".down_proj." in key
            out[key] = mx.zeros_like(value) if zero else value
    return out


def save(model: Any, config: dict[str, Any], out: Path) -> None:
    """The model folder's config and weights (the tokenizer's files are written first)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    (out / "config.json").write_text(json.dumps(config, indent=2))
    weights = dict(tree_flatten(model.parameters()))  # fp32: the CPU's gather_mm needs it
    mx.save_safetensors(str(out / "model.safetensors"), weights)


if __name__ == "__main__":
    main()
