"""The Embeddings body decoder, the base64 encoding and the engine's batch layout (pure)."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mlx_responses.http_facade.embeddings.from_proto import vector_json
from mlx_responses.http_facade.embeddings.to_proto import MAX_INPUTS, embeddings_from_json
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.service.engine.embedding.forward import chunks, padded, pooled
from mlx_responses.service.engine.embedding.load import st_pooling
from mlx_responses.service.models.embedding_runtime import truncated


def _kinds(body: dict[str, Any]) -> list[str]:
    req = embeddings_from_json(body).request
    return [str(i.WhichOneof("kind")) for i in req.inputs]


def test_every_input_shape_openai_takes() -> None:
    assert _kinds({"model": "m", "input": "hi"}) == ["text"]
    assert _kinds({"model": "m", "input": ["a", "b"]}) == ["text", "text"]
    assert _kinds({"model": "m", "input": [1, 2, 3]}) == ["tokens"]
    assert _kinds({"model": "m", "input": [[1, 2], [3]]}) == ["tokens", "tokens"]
    req = embeddings_from_json({"model": "m", "input": [[1, 2], [3]]}).request
    assert [list(i.tokens.ids) for i in req.inputs] == [[1, 2], [3]]


def test_options_reach_the_request() -> None:
    req = embeddings_from_json(
        {
            "model": "m",
            "input": "x",
            "encoding_format": "base64",
            "dimensions": 16.0,
            "user": "u-1",
            "keep_alive": "5m",
        }
    )
    assert req.encoding_format == "base64"
    assert req.request.dimensions == 16
    assert req.request.user == "u-1"
    assert req.request.keep_alive_seconds == 300
    plain = embeddings_from_json({"model": "m", "input": "x", "encoding_format": None})
    assert plain.encoding_format == "float"
    assert not plain.request.HasField("dimensions")


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"input": "x"}, "model", "missing_required_parameter"),
        ({"model": "m"}, "input", "missing_required_parameter"),
        ({"model": "", "input": "x"}, "model", "invalid_type"),
        ({"model": "m", "input": ""}, "input", "invalid_value"),
        ({"model": "m", "input": []}, "input", "invalid_value"),
        ({"model": "m", "input": ["a", ""]}, "input", "invalid_value"),
        ({"model": "m", "input": ["a", 1]}, "input", "invalid_value"),
        ({"model": "m", "input": [1, -2]}, "input", "invalid_value"),
        ({"model": "m", "input": [True, 2]}, "input", "invalid_value"),
        ({"model": "m", "input": [[1], []]}, "input", "invalid_value"),
        ({"model": "m", "input": [1.5]}, "input", "invalid_value"),
        ({"model": "m", "input": {"text": "x"}}, "input", "invalid_value"),
        ({"model": "m", "input": ["a"] * (MAX_INPUTS + 1)}, "input", "invalid_value"),
        (
            {"model": "m", "input": "x", "encoding_format": "int8"},
            "encoding_format",
            "invalid_value",
        ),
        ({"model": "m", "input": "x", "dimensions": 0}, "dimensions", "invalid_value"),
        ({"model": "m", "input": "x", "dimensions": "8"}, "dimensions", "invalid_type"),
        ({"model": "m", "input": "x", "dimensions": 2.5}, "dimensions", "invalid_type"),
        ({"model": "m", "input": "x", "user": 3}, "user", "invalid_type"),
        ({"model": "m", "input": "x", "keep_alive": "soon"}, "keep_alive", "invalid_value"),
    ],
)
def test_bad_bodies_are_400s_naming_the_param(body: dict[str, Any], param: str, code: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        embeddings_from_json(body)
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, param, code)


def test_base64_is_the_float32_little_endian_bytes() -> None:
    values = [0.25, -1.5, 3.0000001192092896, 1e-8]
    encoded = vector_json(values, "base64")
    assert isinstance(encoded, str)
    raw = base64.b64decode(encoded)
    assert raw == struct.pack("<4f", *values)
    decoded = np.frombuffer(raw, dtype="<f4")
    assert decoded.tolist() == np.array(values, dtype=np.float32).tolist()
    assert vector_json(values, "float") == values


def test_chunks_sort_by_length_and_bound_rows_and_padded_tokens() -> None:
    lengths = [5, 1, 3, 8, 2]
    assert chunks(lengths, max_rows=64, max_tokens=1000) == [[1, 4, 2, 0, 3]]
    assert chunks(lengths, max_rows=2, max_tokens=1000) == [[1, 4], [2, 0], [3]]
    # 3 rows of 5 padded tokens = 15 > 12: the row of 5 starts a new forward.
    assert chunks(lengths, max_rows=64, max_tokens=12) == [[1, 4, 2], [0], [3]]
    assert chunks([100], max_rows=4, max_tokens=10) == [[0]]  # a long row still runs alone


def test_padded_rows_and_mask() -> None:
    ids, mask = padded([[7, 8, 9], [4]], pad_id=0)
    assert ids.tolist() == [[7, 8, 9], [4, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_truncated_vectors_are_cut_and_renormalised() -> None:
    vectors = np.array([[3.0, 4.0, 12.0], [1.0, 0.0, 0.0]], dtype=np.float32)
    cut = truncated(vectors, 2)
    assert cut.shape == (2, 2)
    np.testing.assert_allclose(cut, [[0.6, 0.8], [1.0, 0.0]], rtol=1e-6)
    assert truncated(vectors, 3) is vectors


def test_sentence_transformers_pooling_over_padded_rows() -> None:
    hidden = mx.array([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]], [[2.0, 4.0], [6.0, 8.0], [5.0, 5.0]]])
    mask = mx.array([[1, 1, 0], [1, 1, 1]])
    assert pooled(hidden, mask, "cls").tolist() == [[1.0, 0.0], [2.0, 4.0]]
    assert pooled(hidden, mask, "lasttoken").tolist() == [[3.0, 2.0], [5.0, 5.0]]
    np.testing.assert_allclose(pooled(hidden, mask, "mean"), [[2.0, 1.0], [13 / 3, 17 / 3]])


def test_the_pooling_a_sentence_transformers_folder_declares(tmp_path: Path) -> None:
    assert st_pooling(tmp_path) is None  # no modules.json: the model's own pooling
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling").mkdir()
    config = {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    assert st_pooling(tmp_path) == "cls"
    config = {"pooling_mode_cls_token": False, "pooling_mode_lasttoken": True}
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    assert st_pooling(tmp_path) == "lasttoken"
