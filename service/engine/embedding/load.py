"""Loads an embedding model folder through mlx-embeddings and describes its vectors."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.mlx_lm_compat import TokenizerWrapper
from mlx_responses.service.engine.model import LoadedModel, context_length_of


@dataclass(frozen=True)
class EmbeddingShape:
    """What an embedding model's vectors are: their width, the narrowest Matryoshka width they
    may be cut to (None: not trained for it), and the id that pads a batch's short rows."""

    dimensions: int
    matryoshka_min: int | None
    pad_id: int
    pooling: str | None = None  # sentence-transformers' (`cls`, `mean`, `lasttoken`); None:
    # the model's own (mlx-embeddings' `text_embeds`)


class NotAnEmbeddingModel(ValueError):
    """A folder mlx-embeddings loads whose output is not one vector per text (a multi-vector
    retriever, a vision tower)."""


def matryoshka_min(config: dict[str, Any], dimensions: int) -> int | None:
    """The narrowest width `dimensions` may ask for: a config's `matryoshka_dimensions` (ours,
    and sentence-transformers conversions that keep it); Qwen3-Embedding is trained down to 32
    (its model card)."""
    declared = config.get("matryoshka_dimensions")
    if isinstance(declared, list) and declared and all(isinstance(d, int) for d in declared):
        return max(1, min(declared))
    if config.get("model_type") == "qwen3":
        return min(32, dimensions)
    return None


POOLING_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "lasttoken",
}


def st_pooling(folder: Path) -> str | None:
    """The pooling a sentence-transformers folder declares (its `modules.json`'s Pooling
    module's config): mlx-embeddings pools BERT and XLM-RoBERTa by the mean, where bge and
    bge-m3, say, were trained on the [CLS] token."""
    try:
        modules = json.loads((folder / "modules.json").read_text())
    except (OSError, ValueError):
        return None
    for module in modules if isinstance(modules, list) else []:
        if isinstance(module, dict) and str(module.get("type", "")).endswith("Pooling"):
            try:
                config = json.loads(
                    (folder / str(module.get("path", "")) / "config.json").read_text()
                )
            except (OSError, ValueError):
                return None
            on = [mode for key, mode in POOLING_MODES.items() if config.get(key)]
            return on[0] if len(on) == 1 else None
    return None


def load_embedding_model(folder: Path, alias: str) -> tuple[LoadedModel, EmbeddingShape]:
    """The model and tokenizer of `folder` (any model type mlx-embeddings knows), probed once:
    a model whose `text_embeds` is not one vector per input is refused."""
    from mlx_embeddings.utils import load_model
    from transformers import AutoTokenizer

    config = json.loads((folder / "config.json").read_text())
    model = load_model(folder, path_to_repo=str(folder))
    hf_tokenizer = AutoTokenizer.from_pretrained(folder)
    probe = model(mx.array([[1, 2]]), attention_mask=mx.array([[1, 1]]))
    vectors = getattr(probe, "text_embeds", None)
    if vectors is None or vectors.ndim != 2:
        raise NotAnEmbeddingModel(
            f"{folder}: mlx-embeddings loads it, but it gives no single vector per text "
            f"(model_type {config.get('model_type')!r})"
        )
    width = int(vectors.shape[-1])
    pad = hf_tokenizer.pad_token_id
    if pad is None:
        pad = hf_tokenizer.eos_token_id or 0
    loaded = LoadedModel(
        model=model,
        tokenizer=TokenizerWrapper(hf_tokenizer),
        path=folder,
        alias=alias,
        context_length=context_length_of(config),
        created=int(time.time()),
        vocab_size=int(config.get("vocab_size", 0)),
    )
    pooling = st_pooling(folder)
    if getattr(probe, "last_hidden_state", None) is None or probe.last_hidden_state.ndim != 3:
        pooling = None  # the model pools inside (ModernBERT's last_hidden_state is pooled)
    return loaded, EmbeddingShape(width, matryoshka_min(config, width), int(pad), pooling)
