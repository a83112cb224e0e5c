"""Builds random-weight qwen3 models in the mlx-lm folder layout (tokenizer from the bundled model).

Random weights rarely emit EOS, so generation runs to max_output_tokens: what disconnect tests
and benchmarks need.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from service.config import BUNDLED_MODEL

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)


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
) -> Path:
    """Writes config.json, model.safetensors and the tokenizer files into `out`."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen3

    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (tokenizer_from / name).exists():
            shutil.copy(tokenizer_from / name, out / name)
    base = json.loads((tokenizer_from / "config.json").read_text())
    config = {
        "model_type": "qwen3",
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
        "tie_word_embeddings": True,
        "eos_token_id": base.get("eos_token_id"),
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    mx.random.seed(seed)
    model = qwen3.Model(qwen3.ModelArgs.from_dict(config))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out
