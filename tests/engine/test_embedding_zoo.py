"""Every embedding family mlx-embeddings loads, as tiny random models: each loads through our
loader, and a padded batch of inputs of different lengths gives each input the vector it gets
alone (the attention mask and the pooling hold across the padding), with the pooling its
folder declares. Random weights: the vectors mean nothing, their equality does."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.engine.embedding.forward import forward
from mlx_responses.service.engine.embedding.load import load_embedding_model

TOKENIZER = BUNDLED_MODEL.parent / "tiny-embed"
SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 64, "vocab_size": 600}  # fmt: skip
FAMILIES: dict[str, dict[str, Any]] = {
    "bert": {"max_position_embeddings": 64, "architectures": ["BertModel"]},
    "xlm-roberta": {"max_position_embeddings": 70, "pad_token_id": 0, "type_vocab_size": 1},
    "modernbert": {
        "max_position_embeddings": 64,
        "architectures": ["ModernBertModel"],
        "classifier_pooling": "mean",
        "global_attn_every_n_layers": 1,
    },
    "qwen3": {
        "num_key_value_heads": 1,
        "head_dim": 16,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
}
# Qwen3-Embedding: a decoder told apart by its sentence-transformers files, last-token pooled.
POOLING = {"qwen3": "lasttoken", "bert": "cls"}


def build(family: str, out: Path) -> Path:
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_embeddings.utils import _get_classes

    out.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / name, out / name)
    config = {"model_type": family, **SMALL, **FAMILIES[family]}
    (out / "config.json").write_text(json.dumps(config))
    model_class, args_class, _, _ = _get_classes(config)
    mx.random.seed(0)
    model = model_class(args_class.from_dict(config))
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights)
    if family in POOLING:
        mode = {"cls": "pooling_mode_cls_token", "lasttoken": "pooling_mode_lasttoken"}
        (out / "1_Pooling").mkdir()
        (out / "1_Pooling" / "config.json").write_text(json.dumps({mode[POOLING[family]]: True}))
        pooling = "sentence_transformers.models.Pooling"
        modules = [{"idx": 1, "name": "1", "path": "1_Pooling", "type": pooling}]
        (out / "modules.json").write_text(json.dumps(modules))
    return out


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_padded_batch_embeds_each_input_as_alone(family: str, tmp_path: Path) -> None:
    importlib.import_module("mlx_embeddings")
    folder = build(family, tmp_path / family)
    from mlx_responses.service.models.embedding_config import embedding_folder

    assert embedding_folder(folder)
    loaded, shape = load_embedding_model(folder, family)
    assert shape.dimensions == SMALL["hidden_size"]
    assert shape.pooling == POOLING.get(family)
    rows = [[5, 17, 40, 9, 11, 3, 7, 8], [5, 22], [5, 30, 31, 4]]
    together = forward(loaded.model, rows, shape.pad_id, shape.pooling)
    alone = np.concatenate([forward(loaded.model, [r], shape.pad_id, shape.pooling) for r in rows])
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(together, alone, atol=1e-4)
    assert not np.allclose(together[0], together[1], atol=1e-3)  # inputs differ, so do vectors
