"""A hybrid vision-language model's language side as mlx-lm's batch calls a text model.

Qwen3.5 (mlx-vlm's `qwen3_5`, and `qwen3_5_moe`: the same with mixture-of-experts MLPs)
interleaves gated-delta linear-attention layers, whose cache is a recurrent state, with
full-attention layers positioned by M-RoPE. The slots hold plain KV only;
mlx-lm's BatchGenerator holds a recurrent state per row (its `ArraysCache` merges, filters and
extracts rows, and masks a row's padding out of its state). So this family decodes in mlx-lm's
batch (`batch/`), with this wrapper as its model: `model(tokens, cache=caches)` gives logits,
as an mlx-lm model does, and `make_cache` makes mlx-lm's caches (so its prompt-cache entries,
checkpoints and disk-tier files are a text Qwen3.5's).

mlx-lm's batch feeds token ids only. Each row's input embeddings (an image prompt's, image
features merged in) and M-RoPE positions are kept here by the batch's uid (`enter`), and the
batch says before each forward which rows it runs and where each stands (`feed`: the tokens its
cache holds); each forward then advances them by its width (a prefill runs a chunk as several
forwards). A row that entered nothing is text: its token embeddings, at its index.

The layers are mlx-vlm's (its weights, its attention and rotary embedding, its gated-delta
update and convolution), so a row decodes as mlx-vlm's own step decodes it; only the linear
layer's cache handling is restated here for mlx-lm's `ArraysCache` (mlx-vlm's layer calls
methods of its own cache class), and the layer loop, without mlx-vlm's per-row detours. A
speculative verify records each linear layer's state after every position (mlx-vlm's
`state_steps` on Metal; without it, the decode's own compiled step a position), so a rejected
draft rolls the states back without a second forward (`roll_back`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
from mlx import nn
from mlx_responses.service.engine.image_prompt import TEXT, RowPositions
from mlx_responses.service.engine.mlx_lm_compat import (
    ArraysCache,
    KVCache,
    create_attention_mask,
    create_ssm_mask,
)
from mlx_responses.service.engine.vision.language import decodable_only

# The vision families whose language side is hybrid (recurrent layers beside attention):
# mlx-vlm's `model_type`s, decoded in mlx-lm's batch through `HybridLanguage`.
HYBRID = ("qwen3_5", "qwen3_5_moe")


@dataclass
class _Row:
    """A sequence's embeddings from prompt position `base` on (None: token embeddings) and its
    positions."""

    base: int
    embeddings: mx.array | None
    positions: RowPositions


class HybridLanguage:
    """Wraps an mlx-vlm Qwen3.5 model (`language_model`) for mlx-lm's batch."""

    def __init__(self, model: Any, n_tokens: int) -> None:
        """`n_tokens`: the tokenizer's ids (the head may be wider)."""
        self.vlm = model
        self.language = model.language_model
        self.inner = self.language.model
        self.model_type = getattr(model.config, "model_type", "qwen3_5")
        self._decodable = decodable_only(n_tokens)
        self._rows: dict[int, _Row] = {}
        self._fed: list[int] = []  # the uids of the next forward's rows, in order
        self._starts: list[int] = []  # each row's position at its next forward
        # Set (to a list) for a speculative verify: each linear layer's cache, the inputs of
        # its convolution and its recurrent state after each position (`roll_back`).
        self.record: list[tuple[Any, mx.array, mx.array]] | None = None

    @property
    def layers(self) -> list[Any]:
        return list(self.inner.layers)

    def make_cache(self) -> list[Any]:
        return [ArraysCache(size=2) if layer.is_linear else KVCache() for layer in self.layers]

    # --- what the batch tells it -----------------------------------------------------------
    def enter(
        self, uid: int, base: int, embeddings: mx.array | None, positions: RowPositions | None
    ) -> None:
        """Sequence `uid` feeds `embeddings` ([n, hidden], for its prompt positions base..)
        and is positioned by `positions` (None: at each token's index)."""
        if embeddings is None and (positions is None or positions.plain):
            self._rows.pop(uid, None)
            return
        self._rows[uid] = _Row(base, embeddings, positions or TEXT)

    def leave(self, uid: int) -> None:
        self._rows.pop(uid, None)

    def feed(self, uids: Sequence[int], starts: Sequence[int]) -> None:
        """The next forward runs rows `uids`, each from position `starts[i]` (its cache's
        tokens); each forward after it runs on from where the last one ended."""
        self._fed = list(uids)
        self._starts = list(starts)

    # --- the forward -----------------------------------------------------------------------
    def __call__(self, inputs: mx.array, cache: list[Any] | None = None) -> mx.array:
        return self.forward_hidden(inputs, cache)[0]

    def project(self, hidden: mx.array) -> mx.array:
        """Logits over the tokenizer's ids from last hidden states (through the token
        embeddings where the checkpoint ties them to its head, as small Qwen3.5s do)."""
        head = getattr(self.language, "lm_head", None)
        out = head(hidden) if head is not None else self.inner.embed_tokens.as_linear(hidden)
        logits: mx.array = self._decodable(hidden, out)
        return logits

    def forward_hidden(
        self, inputs: mx.array, cache: list[Any] | None = None
    ) -> tuple[mx.array, mx.array]:
        """The forward's logits and last (normed) hidden states (what an MTP head reads)."""
        rows, width = inputs.shape
        fed = self._fed if len(self._fed) == rows else [-1] * rows
        starts = self._starts if len(self._starts) == rows else [0] * rows
        h = self.inner.embed_tokens(inputs)
        rows_of = [self._rows.get(uid) for uid in fed]
        if any(r is not None and r.embeddings is not None for r in rows_of):
            h = mx.stack([_embedded(h[i], row, starts[i], width) for i, row in enumerate(rows_of)])
        positions = None
        if len(self._fed) == rows:  # fed: each row from its own start (else its cache offset)
            spans = [
                (r.positions if r else TEXT).span(s, width)
                for r, s in zip(rows_of, starts, strict=True)
            ]
            positions = mx.array(np.stack(spans, axis=1))  # [3, rows, width]
        self._starts = [s + width for s in starts]
        out = self._layers(h, cache, positions)
        return self.project(out), out

    def _layers(self, h: mx.array, cache: list[Any] | None, positions: mx.array | None) -> mx.array:
        """mlx-vlm's layer loop on mlx-lm's caches, masks and (text alone) positions."""
        inner = self.inner
        layers = inner.layers
        if cache is None:
            cache = [None] * len(layers)
        if positions is None:
            positions = _from_offsets(cache[inner.fa_idx], h.shape[0], h.shape[1])
        fa_mask = create_attention_mask(h, cache[inner.fa_idx])
        ssm_mask = create_ssm_mask(h, cache[inner.ssm_idx])
        embeddings = None
        for layer in layers:
            if not layer.is_linear:
                if not layer.self_attn.rotary_emb.fused_apply:
                    embeddings = layer.self_attn.rotary_emb(h, positions)
                break
        for layer, c in zip(layers, cache, strict=True):
            x = layer.input_layernorm(h)
            if layer.is_linear:
                r = _linear(layer.linear_attn, x, ssm_mask, c, self.record)
            else:
                r = layer.self_attn(
                    x,
                    mask=fa_mask,
                    cache=c,
                    position_ids=positions,
                    position_embeddings=embeddings,
                )
            h = h + r
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        out: mx.array = inner.norm(h)
        return out


def _embedded(tokens: mx.array, row: _Row | None, start: int, width: int) -> mx.array:
    """[width, hidden]: a row's input embeddings at positions start.., its own where it has
    them, else its tokens' (`tokens`; right padding past its prompt)."""
    if row is None or row.embeddings is None:
        return tokens
    first = start - row.base
    have = row.embeddings.shape[0]
    lo, hi = max(first, 0), min(first + width, have)
    if hi <= lo:
        return tokens
    parts = []
    if lo > first:
        parts.append(tokens[: lo - first])
    parts.append(row.embeddings[lo:hi].astype(tokens.dtype))
    if hi < first + width:
        parts.append(tokens[hi - first :])
    return mx.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]


def _from_offsets(cache: Any, rows: int, width: int) -> mx.array:
    """[3, rows, width]: each row at its cache's offset on (text alone)."""
    offset = cache.offset if cache is not None else 0
    base = mx.arange(width, dtype=mx.int32)[None, :]
    if isinstance(offset, mx.array) and offset.ndim > 0:
        ids = mx.maximum(offset, 0).astype(mx.int32)[:, None] + base
    else:
        ids = mx.broadcast_to(base + int(offset), (rows, width))
    return mx.broadcast_to(ids[None], (3, rows, width))


def roll_back(record: list[tuple[Any, mx.array, mx.array]], kept: list[int]) -> None:
    """Each linear layer's cache as it was after row i's first `kept[i]` positions of the
    recorded forward (a speculative verify's kept tokens): its convolution's last inputs and
    its recurrent state there, taken from what the forward recorded (no forward again)."""
    at = mx.array(kept)
    for cache, conv_input, states in record:
        keep = cache[0].shape[1]
        ends = at[:, None] + mx.arange(keep)
        cache[0] = mx.take_along_axis(conv_input, ends[..., None], axis=1)
        step = (at - 1).reshape(-1, *([1] * (states.ndim - 1)))
        cache[1] = mx.take_along_axis(states, step, axis=1)[:, 0]


def _linear(
    attn: Any,
    x: mx.array,
    mask: mx.array | None,
    cache: Any,
    record: list[tuple[Any, mx.array, mx.array]] | None = None,
) -> mx.array:
    """mlx-vlm's Qwen3.5 gated-delta layer (`Qwen3_5GatedDeltaNet.__call__`, its ops in its
    order) on mlx-lm's `ArraysCache`: [0] the convolution's last inputs, [1] the recurrent
    state, `lengths` a right-padded prefill's rows' lengths (their state ends there)."""
    from mlx_vlm.models.qwen3_5.gated_delta import gated_delta_update

    rows, width, _ = x.shape
    mixed = attn.in_proj_qkv(x)
    z = attn.in_proj_z(x).reshape(rows, width, -1, attn.head_v_dim)
    b, a = attn._project_gates(x)
    keep = attn.conv_kernel_size - 1
    state = cache[0] if cache is not None else None
    if state is None or state.shape[0] != rows:
        state = mx.zeros((rows, keep, attn.conv_dim), dtype=x.dtype)
    if mask is not None and mask.shape[0] != rows:
        mask = None
    if mask is not None:
        mixed = mx.where(mask[..., None], mixed, 0)
    conv_input = mx.concatenate([state, mixed], axis=1)
    if cache is not None:
        if cache.lengths is not None:
            ends = mx.clip(cache.lengths, 0, width)[:, None] + mx.arange(keep)
            cache[0] = mx.take_along_axis(conv_input, ends[..., None], axis=1)
        else:
            cache[0] = mx.contiguous(conv_input[:, width : width + keep])
    if (
        width == 1
        and conv_input.shape[1] == attn.conv_kernel_size
        and attn.conv1d.weight.dtype in (mx.bfloat16, mx.float16)
    ):
        conv_out = nn.silu(attn._causal_conv1d_decode(conv_input))
    else:
        conv_out = nn.silu(attn.conv1d(conv_input))
    q, k, v = [
        t.reshape(rows, width, heads, dim)
        for t, heads, dim in zip(
            mx.split(conv_out, [attn.key_dim, 2 * attn.key_dim], -1),
            [attn.num_k_heads, attn.num_k_heads, attn.num_v_heads],
            [attn.head_k_dim, attn.head_k_dim, attn.head_v_dim],
            strict=True,
        )
    ]
    q, k = attn._normalize_qk(q, k)
    recurrent = cache[1] if cache is not None else None
    if recurrent is not None and recurrent.shape[0] != rows:
        recurrent = None
    kernel = not attn.training and mx.default_device() == mx.gpu and mx.metal.is_available()
    if record is not None and cache is not None and not kernel:  # the state at each position
        out, recurrent, states = _recorded_update(
            attn, q, k, v, a=a, b=b, state=recurrent, mask=mask
        )
        record.append((cache, conv_input, states))
    else:
        steps = {} if record is None or cache is None else {"state_steps": width}
        out, recurrent, *kept = gated_delta_update(
            q,
            k,
            v,
            a,
            b,
            attn.A_log,
            attn.dt_bias,
            state=recurrent,
            mask=mask,
            use_kernel=not attn.training,
            **steps,
        )
        if kept and record is not None:  # mlx-vlm's kernel gave the state at each position
            record.append((cache, conv_input, kept[0]))
    if cache is not None:
        cache[1] = recurrent
        cache.advance(width)
    out = attn.norm(out, z)
    result: mx.array = attn.out_proj(out.reshape(rows, width, -1))
    return result


def _recorded_update(
    attn: Any,
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    a: mx.array,
    b: mx.array,
    state: mx.array | None,
    mask: mx.array | None,
) -> tuple[mx.array, mx.array, mx.array]:
    """mlx-vlm's gated-delta update over `q`'s positions without its Metal kernel, keeping the
    state after each: its outputs, last state and the states ([rows, width, ...]). One
    compiled step a position, the one a one-token decode takes there (mlx-vlm's
    `gated_delta_ops`), so a verify's recurrent arithmetic is the decode's, position by
    position; mlx-vlm's `state_steps` fallback restates that step uncompiled (a verify over 5
    positions: 1,294 graph nodes, 1,114 this way; on a CPU each costs microseconds)."""
    from mlx_vlm.models.qwen3_5.gated_delta import _compute_g_beta, _gated_delta_step_ops

    g, beta = _compute_g_beta(attn.A_log, a, b, attn.dt_bias)
    rows, width, k_heads, k_dim = q.shape
    v_heads, v_dim = v.shape[-2:]
    if state is None:
        state = mx.zeros((rows, v_heads, v_dim, k_dim), dtype=mx.float32)
    if (repeat := v_heads // k_heads) > 1:
        q, k = mx.repeat(q, repeat, -2), mx.repeat(k, repeat, -2)
    ys, states = [], []
    for t in range(width):
        at = None if mask is None else mask[:, t]
        y, state = _gated_delta_step_ops(q[:, t], k[:, t], v[:, t], g[:, t], beta[:, t], state, at)
        ys.append(y)
        states.append(state)
    return mx.stack(ys, axis=1), state, mx.stack(states, axis=1)
