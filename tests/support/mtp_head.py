"""A random MTP head written into a model folder as a checkpoint ships it: `mtp.*` tensors in
the Hugging Face layout (Qwen3.5's: `mtp.fc`, `mtp.pre_fc_norm_*`, `mtp.layers.N.*`,
`mtp.norm`; its RMSNorm weights zero-centred, as mlx-vlm's drafter `sanitize` reads them),
in a safetensors file of their own beside the model's."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.utils import load_model
from mlx_responses.service.engine.mtp import new_head

NORMS = (
    "norm.weight",
    "layernorm.weight",
    "pre_fc_norm_embedding.weight",
    "pre_fc_norm_hidden.weight",
)


def add_mtp_head(folder: Path, *, seed: int = 3) -> Path:
    """Writes a random MTP head for the model in `folder` (`model-mtp.safetensors`)."""
    model, _ = load_model(folder)
    mx.random.seed(seed)
    head = new_head(model)
    weights = {}
    for name, value in tree_flatten(head.parameters()):
        norm = name.endswith(NORMS) and value.ndim == 1
        weights[f"mtp.{name}"] = (
            value - 1.0 if norm else value
        )  # the checkpoint's zero-centred norm
    mx.save_safetensors(str(folder / "model-mtp.safetensors"), weights)
    return folder
