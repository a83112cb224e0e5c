"""Builds random-weight qwen3 models in the mlx-lm folder layout (tokenizer from the bundled model).

They never emit EOS, greedy or sampled, so generation runs to max_output_tokens: what cancel,
disconnect and batching tests and the benchmarks need. Random weights alone would not promise
that: over a 3.4k vocabulary, sampling at temperature 1 draws the end token within a few thousand
steps more often than not.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)


def tiny_qwen3(**config: Any) -> Any:
    """An in-memory qwen3 of a few thousand random weights (hidden 16, 2 heads, vocabulary 32):
    for tests of caches and masks; `config` overrides its config fields."""
    from mlx_lm.models import qwen3

    args = {
        "model_type": "qwen3",
        "hidden_size": 16,
        "num_hidden_layers": 3,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "rms_norm_eps": 1e-6,
        "vocab_size": 32,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        **config,
    }
    return qwen3.Model(qwen3.ModelArgs.from_dict(args))


def build_random_model(
    out: Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    intermediate_size: int = 128,
    heads: int = 4,
    kv_heads: int = 2,
    context: int = 4096,
    seed: int = 0,
    tokenizer_from: Path = BUNDLED_MODEL,
    never_emit: Iterable[int] = (),
    sliding_window: int | None = None,
    model_type: str = "qwen3",
    index: bool = False,
) -> Path:
    """Writes config.json, model.safetensors and the tokenizer files into `out`.

    The model never emits its end tokens, nor the tokens in `never_emit`. With
    `sliding_window`, its config declares (Qwen's way) that every layer attends over that many
    tokens. `model_type`: "qwen3" (mlx-lm shards it tensor-parallel) or "qwen2" (tensor or
    pipeline); `index`: also write model.safetensors.index.json (mlx-lm's pipeline load reads
    it).
    """
    import importlib

    import mlx.core as mx
    from mlx.utils import tree_flatten

    arch = importlib.import_module(f"mlx_lm.models.{model_type}")

    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (tokenizer_from / name).exists():
            shutil.copy(tokenizer_from / name, out / name)
    base = json.loads((tokenizer_from / "config.json").read_text())
    config = {
        "model_type": model_type,
        "hidden_size": hidden_size,
        "num_hidden_layers": layers,
        "intermediate_size": intermediate_size,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": hidden_size // heads,
        "rms_norm_eps": 1e-6,
        "vocab_size": base["vocab_size"],
        "max_position_embeddings": context,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "eos_token_id": base.get("eos_token_id"),
    }
    if sliding_window is not None:
        config |= {
            "use_sliding_window": True,
            "sliding_window": sliding_window,
            "max_window_layers": 0,
        }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    mx.random.seed(seed)
    model = arch.Model(arch.ModelArgs.from_dict(config))
    _never_emit(model, sorted(_end_ids(tokenizer_from, config["eos_token_id"]) | set(never_emit)))
    mx.eval(model.parameters())
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights)
    if index:
        weight_map = {name: "model.safetensors" for name in weights}
        (out / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return out


# Every token's embedding holds this in residual dimension 0 (about the size of its other
# entries), which no layer reads or writes.
_ANCHOR = 0.5
_NEVER_LOGIT_PER_UNIT = -1000.0


def _never_emit(model: Any, token_ids: list[int]) -> None:
    """Makes these tokens' logits hugely negative at every position, whatever the input.

    Residual dimension 0 is a constant: every embedding holds _ANCHOR there, the layers' input
    norms give it weight 0 and their output projections write nothing to it, so the layers
    compute as if it were not there and after the final RMSNorm it is positive. The head
    (untied, so that end tokens read differently from how they embed) is the embedding except
    there: its rows for these tokens read only that dimension, with a large negative weight,
    and every other row ignores it.
    """
    import mlx.core as mx

    embed = model.model.embed_tokens.weight
    embed[:, 0] = _ANCHOR
    model.model.embed_tokens.weight = embed
    for layer in model.model.layers:
        for norm in (layer.input_layernorm, layer.post_attention_layernorm):
            scale = norm.weight
            scale[0] = 0.0
            norm.weight = scale
        for proj in (layer.self_attn.o_proj, layer.mlp.down_proj):
            out = proj.weight
            out[0] = 0.0
            proj.weight = out
    # A copy of the embedding, as a tied model's head would be: random models then favour
    # repeating their input, which is what lets one random model draft for another.
    head = embed * 1.0
    head[:, 0] = 0.0
    never = mx.array(token_ids)
    head[never] = 0.0
    head[never, 0] = _NEVER_LOGIT_PER_UNIT
    model.lm_head.weight = head


def _end_ids(tokenizer_from: Path, configured: int | list[int] | None) -> set[int]:
    """The config's eos_token_id(s) and the tokenizer's eos_token: what mlx-lm stops on."""
    from tokenizers import Tokenizer

    ids = set([configured] if isinstance(configured, int) else configured or [])
    special = tokenizer_from / "tokenizer_config.json"
    eos = json.loads(special.read_text()).get("eos_token") if special.exists() else None
    if isinstance(eos, dict):
        eos = eos.get("content")
    if isinstance(eos, str):
        token = Tokenizer.from_file(str(tokenizer_from / "tokenizer.json")).token_to_id(eos)
        if token is not None:
            ids.add(token)
    return ids
