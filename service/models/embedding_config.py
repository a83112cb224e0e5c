"""Whether a model folder is an embedding model (read before anything imports MLX).

An encoder's config names it (BERT, ModernBERT, XLM-RoBERTa); a decoder trained for embeddings
(Qwen3-Embedding, EmbeddingGemma) declares the same `model_type` as its chat siblings, so its
sentence-transformers files tell it apart (`modules.json`, `config_sentence_transformers.json`:
the pooling a sentence-transformers model runs after the network).
"""

from __future__ import annotations

import json
from pathlib import Path

ENCODER_TYPES = frozenset({"bert", "modernbert", "xlm-roberta", "xlm_roberta"})
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "config_sentence_transformers.json")


def embedding_folder(folder: Path) -> bool:
    """An encoder's config.json, or a folder with sentence-transformers' files."""
    config = json.loads((folder / "config.json").read_text())
    if str(config.get("model_type", "")) in ENCODER_TYPES:
        return True
    return any((folder / name).is_file() for name in SENTENCE_TRANSFORMERS_FILES)
