"""Random drafter folders of mlx-vlm's formats for a target model folder: an EAGLE-3 head (a
Speculators `eagle3` checkpoint: `speculators_model_type`, `transformer_layer_config`, the
target's layers to read) and a DFlash head (a `qwen3` config with its `dflash_config`), each
with random weights of the shapes mlx-vlm's classes declare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten


def _target(target: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((target / "config.json").read_text())
    return config.get("text_config", config)


def _write(out: Path, config: dict[str, Any], model: Any) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out


def write_eagle3(
    out: Path,
    target: Path,
    *,
    layers: tuple[int, int, int],
    seed: int = 7,
    vocab: int | None = None,
) -> Path:
    """An EAGLE-3 head for `target` reading the inputs of its `layers` (their ids, as the
    checkpoints' `eagle_aux_hidden_state_layer_ids` give them); `vocab`: another vocabulary
    size than the target's."""
    from mlx_vlm.speculative.drafters.eagle3 import Model, ModelConfig

    t = dict(_target(target))
    t["vocab_size"] = vocab or t["vocab_size"]
    config = {
        "speculators_model_type": "eagle3",
        "architectures": ["Eagle3Speculator"],
        "transformer_layer_config": {
            "model_type": "llama",
            "hidden_size": t["hidden_size"],
            "intermediate_size": 2 * t["hidden_size"],
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": t["vocab_size"],
            "rms_norm_eps": 1e-5,
        },
        "draft_vocab_size": t["vocab_size"],
        "target_hidden_size": t["hidden_size"],
        "eagle_aux_hidden_state_layer_ids": list(layers),
    }
    mx.random.seed(seed)
    return _write(out, config, Model(ModelConfig.from_dict(config)))


def write_dflash(out: Path, target: Path, *, layers: list[int], seed: int = 9) -> Path:
    """A DFlash head for `target` reading the outputs of its `layers`, drafting blocks of 4."""
    from mlx_vlm.speculative.drafters.qwen3_dflash import Model, ModelConfig

    t = _target(target)
    config = {
        "model_type": "qwen3",
        "architectures": ["DFlashDraftModel"],
        "hidden_size": t["hidden_size"],
        "intermediate_size": 2 * t["hidden_size"],
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": t["vocab_size"],
        "rms_norm_eps": 1e-6,
        "block_size": 4,
        "tie_word_embeddings": True,
        "dflash_config": {"mask_token_id": t["vocab_size"] - 1, "target_layer_ids": layers},
    }
    mx.random.seed(seed)
    return _write(out, config, Model(ModelConfig.from_dict(config)))
