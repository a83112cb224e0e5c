"""How many bytes of KV cache a sequence of n tokens holds, from the model's config.

Per attention layer and token, a KV cache holds a key and a value of `num_key_value_heads x
head_dim` elements (grouped-query attention shares few KV heads among many query heads), in the
model's dtype, or under `--kv-bits` packed to 4 or 8 bits with a scale and a bias (model dtype)
per group of `group` elements (mlx's `quantize`). A layer with a sliding window keeps at most
its window (mlx-lm's `RotatingKVCache`: while a prefill chunk goes in, the window plus that
chunk). A plain cache grows in steps of 256 tokens (mlx-lm's `KVCache.step`), so a sequence
holds its length rounded up to the step.

The budget (budget.py) reserves `bytes_for(prompt + output)` for each sequence it admits; the
figure is checked against the caches a real model makes (tests/engine/test_kv_layout.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mlx_responses.service.engine.sliding_window import SLIDING, declared_window

STEP = 256  # tokens a plain KV cache grows by (mlx-lm's KVCache.step)


@dataclass(frozen=True)
class KVLayout:
    """The KV memory of one sequence of a model: per layer, its window (None: every token)."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int  # of the model's activations (bfloat16: 2, float32: 4)
    windows: tuple[int | None, ...] = ()  # per layer; () : no layer slides
    kv_bits: int | None = None
    group: int = 64  # quantization group, with kv_bits
    chunk: int = 0  # prefill tokens a rotating window holds beyond itself while they go in
    # A draft model's KV, kept beside the model's for every sequence (--speculative draft).
    draft: KVLayout | None = None

    @property
    def element_bytes(self) -> float:
        """Bytes of one cached element: the dtype's, or the packed bits plus a scale and a bias
        per group."""
        if self.kv_bits is None:
            return float(self.dtype_bytes)
        return self.kv_bits / 8 + 2 * self.dtype_bytes / self.group

    @property
    def layer_token_bytes(self) -> float:
        """Bytes one token takes in one layer: its key and its value."""
        return 2 * self.kv_heads * self.head_dim * self.element_bytes

    @property
    def bytes_per_token(self) -> int:
        """Bytes one more token takes over every layer (a windowed layer's too: the most)."""
        own = math.ceil(self.layers * self.layer_token_bytes)
        return own + (self.draft.bytes_per_token if self.draft is not None else 0)

    def bytes_for(self, tokens: int) -> int:
        """The bytes a sequence of `tokens` tokens holds at most over every layer."""
        if tokens <= 0:
            return 0
        held = 0
        windows = self.windows or (None,) * self.layers
        for window in windows:
            if window is None:
                held += _rounded(tokens)
            else:
                held += min(tokens, window + self.chunk)
        own = math.ceil(held * self.layer_token_bytes)
        return own + (self.draft.bytes_for(tokens) if self.draft is not None else 0)

    def tokens_in(self, n_bytes: int) -> int:
        """The longest sequence whose KV fits in `n_bytes` (every token, without a window)."""
        per = self.bytes_per_token
        return int(n_bytes // per) if per > 0 else 0


def _rounded(tokens: int) -> int:
    return -(-tokens // STEP) * STEP


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a config (a vision-language model nests it)."""
    nested = config.get("text_config")
    return nested if isinstance(nested, Mapping) else config


def layer_windows(config: Mapping[str, Any]) -> tuple[int | None, ...]:
    """Each layer's sliding window as the config declares it; () where none slides.

    Conservative (a window counted where the model attends to everything would underestimate
    its KV): an explicit `layer_types` list (Qwen, Llama 4, GPT-OSS), Qwen's declaration that
    every layer slides (sliding_window.py), or Gemma's `sliding_window_pattern` (every n-th
    layer attends to everything). A bare `sliding_window` says nothing: mlx-lm's Qwen and Llama
    ignore it. A loaded model's own caches are the authority (`cache_windows`).
    """
    layers = int(config.get("num_hidden_layers", 0))
    window = config.get("sliding_window")
    if not isinstance(window, int) or window < 1:
        return ()
    types = config.get("layer_types")
    if isinstance(types, Sequence) and not isinstance(types, str) and len(types) == layers:
        return tuple(window if t == SLIDING else None for t in types)
    if declared_window(dict(config)) is not None:
        return (window,) * layers
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 0:
        return tuple(None if (i + 1) % pattern == 0 else window for i in range(layers))
    return ()


_SIZES = ("num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size")


def model_sizes(model: Any) -> dict[str, int]:
    """The attention sizes a loaded mlx-lm model's arguments hold (`model.args`, which mlx-lm
    fills and derives from the config), by the config's names: those a config may leave out."""
    args = getattr(model, "args", None)
    held = vars(args) if args is not None and hasattr(args, "__dict__") else {}
    return {k: v for k in _SIZES if isinstance(v := held.get(k), int) and v > 0}


def kv_layout(
    config: Mapping[str, Any],
    dtype_bytes: int,
    *,
    kv_bits: int | None = None,
    group: int = 64,
    windows: Sequence[int | None] | None = None,
    chunk: int = 0,
    draft: KVLayout | None = None,
) -> KVLayout:
    """The KV layout of a model from its config (`config.json`).

    `windows`: each layer's window as the loaded model's caches say (they win over the config,
    which an architecture may read its own way), one per cache the model makes: their count is
    the layers' (a config may not say: transformers 5 writes nemotron_h's block list and no
    `num_hidden_layers`, which mlx-lm derives); `chunk`: the prefill step (a rotating window
    holds it beyond itself while it goes in). A recurrent layer's cache is counted as a KV
    layer's (more than its fixed state: the budget errs high).
    """
    text = text_config(config)
    layers = len(windows) if windows is not None else int(text["num_hidden_layers"])
    heads = int(text.get("num_attention_heads", 1))
    kv_heads = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    found = tuple(windows) if windows is not None else layer_windows(text)
    if all(w is None for w in found):
        found = ()
    return KVLayout(
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        dtype_bytes=dtype_bytes,
        windows=found,
        kv_bits=kv_bits,
        group=group,
        chunk=chunk,
        draft=draft,
    )


def cache_windows(caches: Sequence[Any]) -> tuple[int | None, ...]:
    """Each layer's window in a model's fresh caches (`make_prompt_cache`): a rotating cache's
    `max_size`, else None."""
    return tuple(
        int(c.max_size) if getattr(c, "max_size", None) is not None else None for c in caches
    )


@dataclass(frozen=True)
class Activations:
    """What a prefill step holds beside the KV while it runs, per prompt prefilled in it.

    A step feeds up to `step` tokens of each of up to `rows` prompts. Each token's hidden
    states and MLP activations are small; on a CPU the attention scores are not: mlx's
    scaled-dot-product attention there materializes `heads x step x keys` scores in float32 and
    their softmax (measured: 1.25x the scores' bytes; 321 MiB for 8 prompts of 512 tokens
    against 4k keys, 4 heads). On a GPU the fused kernel keeps them on chip (`scores` False).
    """

    rows: int  # prompts prefilled together
    step: int  # tokens of each per step
    heads: int  # query heads
    hidden: int
    intermediate: int
    dtype_bytes: int
    scores: bool  # the scores are materialized (a CPU)

    def bytes_for(self, sequences: int, keys: int) -> int:
        """The step's activations with `sequences` live (at most `rows` prefill together) and
        attention over `keys` positions at most."""
        rows = min(self.rows, sequences)
        if rows <= 0:
            return 0
        per_token = (6 * self.hidden + 3 * self.intermediate) * self.dtype_bytes
        if self.scores:
            per_token += int(self.heads * keys * 4 * 1.25)
        return rows * self.step * per_token


def activations(
    config: Mapping[str, Any], dtype_bytes: int, *, rows: int, step: int, scores: bool
) -> Activations:
    """The prefill activations of a model from its config (`config.json`)."""
    text = text_config(config)
    hidden = int(text.get("hidden_size", 0))
    return Activations(
        rows=rows,
        step=step,
        heads=int(text.get("num_attention_heads", 1)),
        hidden=hidden,
        intermediate=int(text.get("intermediate_size", 4 * hidden)),
        dtype_bytes=dtype_bytes,
        scores=scores,
    )
