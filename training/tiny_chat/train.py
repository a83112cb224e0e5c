"""Trains the bundled tiny chat model from scratch (MLX, CPU) and writes an mlx-lm model folder."""

from __future__ import annotations

import argparse
import bisect
import json
import logging
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from training.tiny_chat.data import (
    COPY_MIX,
    FULL_MIX,
    SHORT_MIX,
    TOOL_MIX,
    Conversation,
    Mix,
    train_conversations,
)
from training.tiny_chat.lexicon import unique_words
from training.tiny_chat.template import compile_template, render
from training.tiny_chat.tokenizer import (
    ENDOFTEXT,
    IM_END,
    build_tokenizer,
    save_tokenizer,
)

if TYPE_CHECKING:
    import mlx.core as mx
    from mlx import nn
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines the trained model."""

    seed: int = 0
    # phases, in order: (mix, steps); copy uses rows of 256 tokens, short 128, the others 256
    # or 512
    copy_steps: int = 0
    short_steps: int = 450
    tool_steps: int = 350
    full_steps: int = 600
    short_batch: int = 8  # rows of 128 tokens
    batch_tokens: int = 2048  # per step in the tool and full phases (8x256 or 4x512)
    lr: float = 1.5e-3
    min_lr_ratio: float = 0.05
    warmup: int = 30
    weight_decay: float = 0.05
    grad_clip: float = 1.0
    hidden_size: int = 192
    layers: int = 3
    heads: int = 4
    kv_heads: int = 4
    head_dim: int = 48
    intermediate_size: int = 512
    rope_theta: float = 10000.0
    qk_norm_init: float = 1.0  # initial q/k RMSNorm gain (see sharpen_attention)
    prompt_loss_weight: float = 0.0  # weight of the LM loss on non-answer tokens
    # sentences around echo/think/tool requests (Mix.p_lead/p_trail), in the tool and full
    # phases only: from the start they keep the copy circuit from forming (R3 in PILOTS.md)
    p_lead: float = 0.0
    p_trail: float = 0.0
    # random-string copy targets (Mix.p_random) in the copy phase's echo turns, in the short and
    # tool phases, and in the full one
    copy_p_random: float = 0.0
    p_random: float = 0.0
    full_p_random: float = 0.0
    # long instructions (100-1,400 tokens) first in this share of the full phase's conversations,
    # in rows of up to 2,048 tokens: agents' prompts are that long (Codex's: ~1,250 tokens)
    p_long_system: float = 0.0
    # in the tool and full phases: the weight of three-part tool names (against 1 for one part
    # and 8 for two) and the share of two-part argument keys; the eval keeps 2 and 0.15
    three_part_names: float = 2.0
    two_part_keys: float = 0.15
    # letter and letter-pair tokens embedded as first-letter + second-letter vectors while
    # training (spelled.py), so copying an unknown word is copying letters
    spelled_embeddings: bool = False
    # `_word` tokens for lexicon words (`load _data _song`), tied to 'word' plus a shared offset
    # while training (needs spelled_embeddings)
    underscore_words: bool = False
    # in the tool and full phases: the share of tool requests composed from parts (Mix.p_composed)
    composed_requests: float = 0.0
    # the context window written to config.json (training rows stay <= 2,048 tokens; with PoSE
    # position skips, the agent stage covers distances beyond them and may claim more)
    max_positions: int = 2048
    # every layer attends over the last this many tokens only (Qwen's `use_sliding_window`,
    # applied by the server: service/engine/sliding_window.py); 0: to every position. Rows
    # stay <= 2,048 tokens, so a window of 2,048 is what training saw, at any context length
    sliding_window: int = 0
    # start from a trained model folder (its tokenizer and weights) instead of from scratch: the
    # agent stage (PILOTS.md) fine-tunes the base recipe's model this way
    init_from: str = ""
    # keep the embedding table (tied: also the output head) as it is: a fine-tune on prose would
    # move the letter-pair rows apart and undo what spelled embeddings made of them (copying)
    freeze_embeddings: bool = False
    # with init_from: where fresh layers go in the grown model (comma-separated indices; layers =
    # the init model's + their number). Each starts as the identity (its attention and MLP
    # output projections zero: LLaMA Pro's block expansion), so the grown model first computes
    # exactly what the init model did
    grow_layers: str = ""
    # train the grown layers only (every other weight frozen), or give them their own lr
    # (0: lr) while the rest trains at lr
    train_only_new: bool = False
    new_layer_lr: float = 0.0
    # in the tool and full phases: the share of rows whose later part is shifted by up to
    # `pose_max_skip` positions (PoSE), so long distances are ones the model has attended across
    pose_share: float = 0.0
    pose_max_skip: int = 30720
    # in the tool and full phases: long instructions from real prose (agent.py), agent-style
    # decoy tools, and apply_patch exchanges (this share of conversations, half ending at the
    # call, half after its result)
    agent_prose: float = 0.0
    decoys: float = 0.0
    patch_share: float = 0.0
    patch_given: float = 0.0  # of the patch requests, the share quoting the patch itself
    # of the patch conversations, the share behind Codex's own developer messages (their tail,
    # as the window holds it at the call) and environment context instead of this project's prose
    codex_preamble: float = 0.0
    # the loss weight of what an apply_patch call copies from the request (its file name and
    # its added line) against 1 for every other target token
    copy_line_weight: int = 1
    min_token_count: int = 8  # corpus pre-tokens seen this often get a token of their own
    tokenizer_conversations: int = 3000


@dataclass
class Packed:
    """Training rows: token ids, segment ids (one per conversation) and target slots."""

    tokens: np.ndarray  # (N, T) int32
    segments: np.ndarray  # (N, T) int32, 0 = padding
    target_pos: np.ndarray  # (N, K) int32: position whose output predicts the target
    target_ids: np.ndarray  # (N, K) int32
    target_w: np.ndarray  # (N, K) float32, 0 = unused slot
    positions: np.ndarray  # (N, T) int32: each token's RoPE position (arange, or skipped)


# ---------------------------------------------------------------------------------------------
# data → token rows
# ---------------------------------------------------------------------------------------------
# In an apply_patch call's JSON arguments: the file name and the added line.
PATCH_LINES = re.compile(r"Add File: ([^\\\"]+)\\n\+([^\\\"]*)\\n")


def copied_spans(answer: str) -> list[tuple[int, int]]:
    """Where a patch call copies its request: the file name and the added line."""
    return [m.span(g) for m in PATCH_LINES.finditer(answer) for g in (1, 2)]


def conversation_example(
    conv: Conversation, template: Any, tok: Tokenizer, copy_weight: int = 1
) -> tuple[list[int], list[int]]:
    """Token ids of a rendered conversation, and the indices of its target tokens.

    A target inside what a patch call copies is listed `copy_weight` times (its loss weight).
    """
    full = render(template, conv.messages, conv.tools)
    spans: list[tuple[int, int]] = []
    copied: list[tuple[int, int]] = []
    for turn in conv.turns:
        if not turn.train:
            continue
        prefix = render(
            template,
            conv.messages[: turn.index],
            conv.tools,
            add_generation_prompt=True,
            enable_thinking=turn.enable_thinking,
        )
        answer = turn.expected + IM_END
        if not full.startswith(prefix) or full[len(prefix) : len(prefix) + len(answer)] != answer:
            raise RuntimeError(f"template/data mismatch in a {conv.kind} conversation")
        spans.append((len(prefix), len(prefix) + len(answer)))
        if copy_weight > 1:
            copied += [(len(prefix) + a, len(prefix) + b) for a, b in copied_spans(answer)]
    enc = tok.encode(full)
    targets: list[int] = []
    for start, end in spans:
        for j, (s, e) in enumerate(enc.offsets):
            if start <= s and e <= end and e > s:
                inside = any(a < e and s < b for a, b in copied)
                targets += [j] * (copy_weight if inside else 1)
            elif s < start < e or s < end < e:
                raise RuntimeError("a token straddles a target boundary")
    return list(enc.ids), targets


Example = tuple[list[int], list[int]]  # token ids, indices of target tokens


def assign_rows(examples: list[Example], lengths: tuple[int, ...]) -> list[list[list[Example]]]:
    """First-fit-decreasing packing into rows of the given lengths (longest first).

    Conversations are placed longest first, each into the tightest gap it fits among the open
    rows (long rows before short ones), so short conversations fill the tails of long rows and
    only the rest get short rows of their own. Returns the rows per length.
    """
    order = sorted(range(len(examples)), key=lambda i: -len(examples[i][0]))
    rows: list[list[list[Example]]] = [[] for _ in lengths]
    # per length: sorted (free space, row index) pairs
    gaps: list[list[tuple[int, int]]] = [[] for _ in lengths]
    for i in order:
        ex = examples[i]
        n = len(ex[0])
        if n > lengths[0]:
            continue
        placed = False
        for b, length in enumerate(lengths):
            g = gaps[b]
            at = bisect.bisect_left(g, (n, -1))
            if at < len(g):
                space, r = g.pop(at)
                rows[b][r].append(ex)
                bisect.insort(g, (space - n, r))
                placed = True
                break
            smaller_fits = b + 1 < len(lengths) and n <= lengths[b + 1]
            if not smaller_fits:
                rows[b].append([ex])
                bisect.insort(g, (length - n, len(rows[b]) - 1))
                placed = True
                break
        if not placed:
            raise RuntimeError("unreachable: every example fits the shortest fitting length")
    return rows


def to_packed(
    rows: list[list[Example]], seq_len: int, pad_id: int, prompt_weight: float = 0.0
) -> Packed:
    """Arrays for packed rows (target slots padded to the widest row).

    With ``prompt_weight`` > 0 every other token is a target too, at that weight (plain LM loss
    on the prompts: repeated names and phrasings in context are what induction heads learn from).
    """
    k = seq_len if prompt_weight > 0 else max(sum(len(t) for _, t in row) for row in rows)
    tokens = np.full((len(rows), seq_len), pad_id, dtype=np.int32)
    segments = np.zeros((len(rows), seq_len), dtype=np.int32)
    target_pos = np.zeros((len(rows), k), dtype=np.int32)
    target_ids = np.zeros((len(rows), k), dtype=np.int32)
    target_w = np.zeros((len(rows), k), dtype=np.float32)
    for r, row in enumerate(rows):
        offset = 0
        slot = 0
        for seg, (ids, targets) in enumerate(row, start=1):
            tokens[r, offset : offset + len(ids)] = ids
            segments[r, offset : offset + len(ids)] = seg
            chosen = set(targets)
            slots = range(1, len(ids)) if prompt_weight > 0 else targets
            for j in slots:
                target_pos[r, slot] = offset + j - 1
                target_ids[r, slot] = ids[j]
                target_w[r, slot] = 1.0 if j in chosen else prompt_weight
                slot += 1
            offset += len(ids)
    positions = np.broadcast_to(np.arange(seq_len, dtype=np.int32), tokens.shape).copy()
    return Packed(tokens, segments, target_pos, target_ids, target_w, positions)


def skip_positions(packed: Packed, share: float, max_skip: int, seed: int) -> None:
    """PoSE: in ``share`` of the rows, positions from a random split on are shifted by a random
    skip (up to ``max_skip``); relative distances across the split then reach the window."""
    rng = np.random.default_rng(seed)
    n, t = packed.tokens.shape
    for r in range(n):
        if rng.random() >= share:
            continue
        split = int(rng.integers(1, t))
        packed.positions[r, split:] += int(rng.integers(0, max_skip + 1))


Batch = tuple[Packed, slice]


def build_phase(
    tok: Tokenizer,
    template: Any,
    mix: Mix,
    n_steps: int,
    buckets: tuple[tuple[int, int], ...],
    *,
    seed: int,
    prompt_weight: float = 0.0,
    pose: tuple[float, int] = (0.0, 0),
    copy_weight: int = 1,
) -> tuple[list[Batch], dict[str, float]]:
    """``n_steps`` batches of ``mix`` conversations, packed into length buckets.

    ``buckets`` are (row length, rows per batch), shortest first; a conversation goes to the
    shortest bucket it fits, so short ones do not pay for long rows' attention.
    """
    pad_id = tok.token_to_id(ENDOFTEXT)
    lengths = tuple(length for length, _ in sorted(buckets, reverse=True))
    batch_rows = dict(buckets)
    examples: list[Example] = []
    chunk = 1000
    n_convs = 0
    while True:
        convs = train_conversations(chunk, seed=seed + n_convs, mix=mix)
        examples += [conversation_example(c, template, tok, copy_weight) for c in convs]
        n_convs += chunk
        total = sum(len(ids) for ids, _ in examples)
        if total < 0.95 * n_steps * min(length * batch_rows[length] for length in lengths):
            continue
        rows = assign_rows(examples, lengths)
        packed = [
            to_packed(r, length, pad_id, prompt_weight) if r else None
            for r, length in zip(rows, lengths, strict=True)
        ]
        if pose[0] > 0:
            for k, p in enumerate(packed):
                if p is not None:
                    skip_positions(p, pose[0], pose[1], seed + 7919 * (k + 1))
        batches: list[Batch] = [
            (p, slice(j * batch_rows[length], (j + 1) * batch_rows[length]))
            for p, length in zip(packed, lengths, strict=True)
            if p is not None
            for j in range(len(p.tokens) // batch_rows[length])
        ]
        if len(batches) >= n_steps:
            break
    random.Random(seed).shuffle(batches)
    batches = batches[:n_steps]
    stats = {
        "conversations": float(n_convs),
        "tokens": float(total),
        "target_tokens": float(sum(len(t) for _, t in examples)),
        "fill": float(np.mean([(p.segments[sl] > 0).mean() for p, sl in batches])),
    }
    for p, length in zip(packed, lengths, strict=True):
        stats[f"batches@{length}"] = float(sum(q is p for q, _ in batches))
    return batches, stats


# ---------------------------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------------------------
def model_config(cfg: TrainConfig, vocab_size: int, eos_id: int, pad_id: int) -> dict[str, Any]:
    """config.json contents (Qwen3 fields that mlx_lm's qwen3 model reads, plus HF metadata)."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.layers,
        "num_attention_heads": cfg.heads,
        "num_key_value_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": cfg.max_positions,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": cfg.sliding_window > 0,
        **(
            {"sliding_window": cfg.sliding_window, "max_window_layers": 0}
            if cfg.sliding_window > 0
            else {}
        ),
        "torch_dtype": "float32",
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
    }


def make_model(config: dict[str, Any]) -> nn.Module:
    from mlx_lm.models import qwen3

    return qwen3.Model(qwen3.ModelArgs.from_dict(config))


def tie_word_variants(model: nn.Module, tok: Tokenizer, seed: int) -> None:
    """Start ' word' as 'word' plus one shared offset.

    Copying across the variants is then easy (they start close), and "the same word after a
    space" is one direction for every word, so the model does not emit 'word' where ' word'
    belongs (with identical starts, tied output embeddings could not tell them apart).
    """
    import mlx.core as mx

    from training.tiny_chat.tokenizer import byte_level, word_variants

    weight = np.array(model.model.embed_tokens.weight)
    rng = np.random.default_rng(seed)
    scale = float(weight.std())
    offset = rng.normal(0.0, scale, weight.shape[1]).astype(weight.dtype)
    for word in unique_words():
        bare, spaced = (tok.token_to_id(byte_level(v)) for v in word_variants(word))
        if bare is not None and spaced is not None:
            weight[spaced] = weight[bare] + offset
    model.model.embed_tokens.weight = mx.array(weight)


def sharpen_attention(model: nn.Module, gain: float) -> None:
    """Start the q/k RMSNorm gains at ``gain``: attention logits can reach gain² x the default.

    Qwen3 normalises queries and keys per head, which caps a logit at sqrt(head_dim) while the
    gains are 1; copying needs attention sharp enough to pick one position out of hundreds.
    """
    import mlx.core as mx

    for layer in model.model.layers:
        attn = layer.self_attn
        attn.q_norm.weight = mx.full(attn.q_norm.weight.shape, gain)
        attn.k_norm.weight = mx.full(attn.k_norm.weight.shape, gain)


def count_params(model: nn.Module) -> int:
    from mlx.utils import tree_flatten

    return sum(v.size for _, v in tree_flatten(model.parameters()))


class PositionedRoPE:
    """nn.RoPE's rotation (``traditional=False``) at explicit positions, for training with PoSE
    skips; ``positions`` (B, T) is set before each forward pass."""

    def __init__(self, dims: int, base: float) -> None:
        self.dims, self.base = dims, base
        self.positions: mx.array | None = None

    def __call__(self, x: mx.array, offset: int = 0) -> mx.array:
        import mlx.core as mx

        assert self.positions is not None
        half = self.dims // 2
        inv = mx.power(self.base, -mx.arange(0, half, dtype=mx.float32) / half)
        angles = self.positions[:, None, :, None].astype(mx.float32) * inv
        cos, sin = mx.cos(angles), mx.sin(angles)
        x1, x2 = x[..., :half], x[..., half : self.dims]
        return mx.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos, x[..., self.dims :]], -1)


def positioned(model: nn.Module) -> PositionedRoPE:
    """Swap every layer's RoPE for one PositionedRoPE (RoPE has no weights; the saved model
    uses mlx-lm's own)."""
    layer = model.model.layers[0].self_attn
    rope = PositionedRoPE(layer.rope.dims, layer.rope.base)
    for layer in model.model.layers:
        object.__setattr__(layer.self_attn, "rope", rope)
    return rope


def target_loss(
    model: nn.Module,
    tokens: mx.array,
    segments: mx.array,
    positions: mx.array,
    targets: tuple[mx.array, mx.array, mx.array],
    *,
    rope: PositionedRoPE | None = None,
) -> mx.array:
    """Cross-entropy on the target slots only, with a block-diagonal causal mask per row.

    ``targets`` = (positions whose output predicts a target, target ids, weights).
    """
    target_pos, target_ids, target_w = targets
    import mlx.core as mx
    from mlx import nn

    b, t = tokens.shape
    if rope is not None:
        rope.positions = positions
    causal = mx.tril(mx.ones((t, t), dtype=mx.bool_))
    same = segments[:, None, :, None] == segments[:, None, None, :]
    mask = same & causal
    h = model.model.embed_tokens(tokens)
    for layer in model.model.layers:
        h = layer(h, mask, None)
    h = model.model.norm(h)
    flat = (target_pos + (mx.arange(b) * t)[:, None]).reshape(-1)
    hs = h.reshape(b * t, -1)[flat]
    logits = model.model.embed_tokens.as_linear(hs)
    w = target_w.reshape(-1)
    ce = nn.losses.cross_entropy(logits, target_ids.reshape(-1)) * w
    return ce.sum() / mx.maximum(w.sum(), 1.0)


def grown_indices(spec: str, layers: int) -> list[int]:
    """The new layers' indices in a grown model of ``layers`` layers (``--grow-layers``)."""
    new = sorted({int(i) for i in spec.split(",") if i.strip()})
    if not new or new[0] < 0 or new[-1] >= layers:
        raise ValueError(f"--grow-layers {spec!r}: indices must lie in 0..{layers - 1}")
    return new


def grow_weights(weights: dict[str, mx.array], new: list[int], layers: int) -> dict[str, mx.array]:
    """A trained model's weights renumbered into a grown model of ``layers`` layers, where the
    layers at ``new`` are the fresh ones (the others keep their order)."""
    old = [i for i in range(layers) if i not in new]
    found = {int(m.group(1)) for k in weights if (m := re.match(r"model\.layers\.(\d+)\.", k))}
    if found != set(range(len(old))):
        raise ValueError(f"the init model has {len(found)} layers; growing needs {len(old)}")
    out: dict[str, mx.array] = {}
    for key, value in weights.items():
        m = re.match(r"model\.layers\.(\d+)\.(.*)", key)
        out[f"model.layers.{old[int(m.group(1))]}.{m.group(2)}" if m else key] = value
    return out


def grow_model(model: nn.Module, init: Path, new: list[int]) -> None:
    """Load ``init``'s weights into ``model`` (built with more layers); the layers at ``new``
    keep their fresh initialisation except their output projections, zeroed: each adds nothing
    to the residual stream until trained, so the grown model starts as the init model."""
    import mlx.core as mx

    weights = grow_weights(
        dict(mx.load(str(init / "model.safetensors"))), new, len(model.model.layers)
    )
    for i in new:
        layer = model.model.layers[i]
        for name, proj in (
            ("self_attn.o_proj", layer.self_attn.o_proj),
            ("mlp.down_proj", layer.mlp.down_proj),
        ):
            weights[f"model.layers.{i}.{name}.weight"] = mx.zeros_like(proj.weight)
    from mlx.utils import tree_flatten

    for key, value in tree_flatten(model.parameters()):
        weights.setdefault(key, value)
    model.load_weights(list(weights.items()), strict=True)


def make_optimizer(cfg: TrainConfig, schedule: Callable[[mx.array], mx.array]) -> Any:
    """AdamW on ``schedule``; with ``--new-layer-lr`` the grown layers get their own AdamW, on
    the same warmup and decay scaled to that peak."""
    import mlx.optimizers as optim

    optimizer = optim.AdamW(
        learning_rate=schedule, betas=(0.9, 0.98), weight_decay=cfg.weight_decay
    )
    if not (cfg.grow_layers and cfg.new_layer_lr > 0 and not cfg.train_only_new):
        return optimizer
    ratio = cfg.new_layer_lr / cfg.lr
    prefixes = tuple(f"model.layers.{i}." for i in grown_indices(cfg.grow_layers, cfg.layers))
    fresh = optim.AdamW(
        learning_rate=lambda step: ratio * schedule(step),
        betas=(0.9, 0.98),
        weight_decay=cfg.weight_decay,
    )
    return optim.MultiOptimizer([fresh, optimizer], [lambda path, _: path.startswith(prefixes)])


def train_model(cfg: TrainConfig, model: nn.Module, batches: list[Batch]) -> list[float]:
    """AdamW with linear warmup and cosine decay; compiled step. Returns the loss per step."""
    from functools import partial

    import mlx.core as mx
    import mlx.optimizers as optim
    from mlx import nn

    schedule = optim.join_schedules(
        [
            optim.linear_schedule(cfg.lr / cfg.warmup, cfg.lr, cfg.warmup),
            optim.cosine_decay(cfg.lr, len(batches) - cfg.warmup, cfg.lr * cfg.min_lr_ratio),
        ],
        [cfg.warmup],
    )
    optimizer = make_optimizer(cfg, schedule)
    # Without skips mlx-lm's own RoPE runs (the base recipe's weights stay byte-identical).
    rope = positioned(model) if cfg.pose_share > 0 else None
    loss_and_grad = nn.value_and_grad(model, partial(target_loss, rope=rope))
    state = [model.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(
        tokens: mx.array,
        segments: mx.array,
        positions: mx.array,
        targets: tuple[mx.array, mx.array, mx.array],
    ) -> mx.array:
        loss, grads = loss_and_grad(model, tokens, segments, positions, targets)
        grads, _ = optim.clip_grad_norm(grads, cfg.grad_clip)
        optimizer.update(model, grads)
        return loss

    history: list[float] = []
    start = time.perf_counter()
    running = 0.0
    seen = 0
    for i, (rows, sl) in enumerate(batches):
        targets = (
            mx.array(rows.target_pos[sl]),
            mx.array(rows.target_ids[sl]),
            mx.array(rows.target_w[sl]),
        )
        loss = step(
            mx.array(rows.tokens[sl]),
            mx.array(rows.segments[sl]),
            mx.array(rows.positions[sl]),
            targets,
        )
        mx.eval(loss, state)
        value = loss.item()
        seen += int((rows.segments[sl] > 0).sum())
        running = value if i == 0 else 0.9 * running + 0.1 * value
        history.append(value)
        if (i + 1) % 20 == 0 or i == 0 or i + 1 == len(batches):
            elapsed = time.perf_counter() - start
            print(
                f"step {i + 1:5d}/{len(batches)}  loss {value:.4f}  avg {running:.4f}  "
                f"lr {float(schedule(mx.array(i))):.2e}  elapsed {elapsed:7.1f}s  "
                f"{seen / elapsed:6.0f} tok/s",
                flush=True,
            )
    return history


def save_model(model: nn.Module, config: dict[str, Any], out: Path) -> int:
    """Writes config.json and model.safetensors (float32); returns the weights file size."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.astype(mx.float32) for k, v in tree_flatten(model.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    # Greedy by default: the server reads its sampling defaults from this file.
    generation = {
        "eos_token_id": config["eos_token_id"],
        "pad_token_id": config["pad_token_id"],
        "do_sample": False,
        "temperature": 0.0,
        "top_p": 1.0,
    }
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    return (out / "model.safetensors").stat().st_size


def preload_blas() -> str:
    """Use the system OpenBLAS for MLX's CPU matmuls when present (must precede `import mlx`)."""
    try:
        from mlx_responses.service.engine.blas import preload_blas as service_preload
    except ImportError:
        return "reference"
    return service_preload()


def parse_args() -> tuple[Path, TrainConfig, bool]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("service/assets/tiny-chat"))
    parser.add_argument("--skip-eval", action="store_true")
    defaults = TrainConfig()
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=value)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    args = parser.parse_args()
    cfg = TrainConfig(**{k: getattr(args, k) for k in asdict(defaults)})
    if cfg.underscore_words and not cfg.spelled_embeddings:
        parser.error("--underscore-words needs --spelled-embeddings (the tie lives there)")
    if cfg.grow_layers and not cfg.init_from:
        parser.error("--grow-layers needs --init-from (the model it grows)")
    if (cfg.train_only_new or cfg.new_layer_lr > 0) and not cfg.grow_layers:
        parser.error("--train-only-new and --new-layer-lr need --grow-layers")
    return args.out, cfg, args.skip_eval


def main() -> None:
    out, cfg, skip_eval = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    blas = preload_blas()
    import mlx.core as mx

    print(f"config: {cfg}\nBLAS: {blas}", flush=True)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    mx.random.seed(cfg.seed)
    wall = time.perf_counter()

    template = compile_template()
    if cfg.init_from:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(Path(cfg.init_from) / "tokenizer.json"))
    else:
        corpus_convs = train_conversations(cfg.tokenizer_conversations, seed=cfg.seed * 1000 + 1)
        corpus = [render(template, c.messages, c.tools) for c in corpus_convs]
        tok = build_tokenizer(
            corpus,
            unique_words(),
            min_count=cfg.min_token_count,
            underscore_words=cfg.underscore_words,
        )
    vocab = tok.get_vocab_size()
    padded_vocab = int(math.ceil(vocab / 64) * 64)
    print(f"tokenizer: {vocab} tokens (model vocab {padded_vocab})", flush=True)

    batches: list[Batch] = []
    long_rows = cfg.batch_tokens // 512
    # What the tool and full phases add to their mixes, and their row lengths.
    late: dict[str, Any] = {
        "name_parts": (1.0, 8.0, cfg.three_part_names),
        "p_two_part_key": cfg.two_part_keys,
        "p_long_system": cfg.p_long_system,
        "p_lead": cfg.p_lead,
        "p_trail": cfg.p_trail,
        "p_composed": cfg.composed_requests,
        "p_agent_prose": cfg.agent_prose,
        "p_decoys": cfg.decoys,
        "p_patch_given": cfg.patch_given,
        "p_codex_preamble": cfg.codex_preamble,
    }
    patch = (("patch_call", cfg.patch_share / 2, 0.0), ("patch", cfg.patch_share / 2, 0.0))
    patch = patch if cfg.patch_share > 0 else ()
    late_buckets = ((256, 2 * long_rows), (512, long_rows)) + (
        ((2048, long_rows // 4),) if cfg.p_long_system > 0 else ()
    )
    phases = (
        (
            "copy",
            replace(COPY_MIX, p_random=cfg.copy_p_random),
            cfg.copy_steps,
            ((256, cfg.short_batch // 2),),
        ),
        (
            "short",
            replace(SHORT_MIX, p_random=cfg.p_random),
            cfg.short_steps,
            ((128, cfg.short_batch),),
        ),
        (
            "tool",
            replace(TOOL_MIX, p_random=cfg.p_random, kinds=TOOL_MIX.kinds + patch, **late),
            cfg.tool_steps,
            late_buckets,
        ),
        (
            "full",
            replace(FULL_MIX, p_random=cfg.full_p_random, kinds=FULL_MIX.kinds + patch, **late),
            cfg.full_steps,
            late_buckets,
        ),
    )
    for k, (name, mix, n_steps, buckets) in enumerate(phases):
        if n_steps > 0:
            part, stats = build_phase(
                tok,
                template,
                mix,
                n_steps,
                buckets,
                seed=cfg.seed * 1000 + 2 + k,
                prompt_weight=cfg.prompt_loss_weight,
                pose=(cfg.pose_share, cfg.pose_max_skip) if name in ("tool", "full") else (0, 0),
                copy_weight=cfg.copy_line_weight,
            )
            batches += part
            print(f"data ({name}): {stats}  ({time.perf_counter() - wall:.1f}s)", flush=True)

    config = model_config(cfg, padded_vocab, tok.token_to_id(IM_END), tok.token_to_id(ENDOFTEXT))
    model = make_model(config)
    if cfg.init_from and cfg.grow_layers:
        grow_model(model, Path(cfg.init_from), grown_indices(cfg.grow_layers, cfg.layers))
    elif cfg.init_from:
        model.load_weights(str(Path(cfg.init_from) / "model.safetensors"))
    else:
        sharpen_attention(model, cfg.qk_norm_init)
        tie_word_variants(model, tok, cfg.seed)
    n_params = count_params(model)
    if cfg.spelled_embeddings and not cfg.init_from:
        from training.tiny_chat.spelled import factor_embeddings, underscore_variants

        variants = underscore_variants(tok, unique_words()) if cfg.underscore_words else None
        factor_embeddings(model, tok, cfg.seed + 1, variants)
    mx.eval(model.parameters())
    print(f"model: {n_params} parameters", flush=True)

    if cfg.freeze_embeddings:
        model.model.embed_tokens.freeze()
    if cfg.train_only_new:
        model.freeze()
        for i in grown_indices(cfg.grow_layers, cfg.layers):
            model.model.layers[i].unfreeze()
    train_start = time.perf_counter()
    train_model(cfg, model, batches)
    train_time = time.perf_counter() - train_start
    if cfg.spelled_embeddings and not cfg.init_from:
        from training.tiny_chat.spelled import materialize

        materialize(model)

    save_tokenizer(tok, out, cfg.max_positions)
    size = save_model(model, config, out)
    print(
        f"saved {out}: {n_params} params, model.safetensors {size} bytes; "
        f"training {train_time:.0f}s, total {time.perf_counter() - wall:.0f}s",
        flush=True,
    )
    if skip_eval:
        return
    from mlx_lm import load

    from training.tiny_chat.evaluate import evaluate, summarize

    loaded, tokenizer = load(str(out))
    eval_start = time.perf_counter()
    scores = summarize(evaluate(loaded, tokenizer))
    for name, value in scores.items():
        print(f"held-out {name:28s} {value:.3f}")
    print(f"eval time {time.perf_counter() - eval_start:.1f}s", flush=True)


if __name__ == "__main__":
    main()
