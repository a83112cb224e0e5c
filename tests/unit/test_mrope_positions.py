"""A Qwen-VL prompt's M-RoPE positions (`positions.MRoPE`) are mlx-vlm's `get_rope_index`'s
(Qwen2-VL's, Qwen2.5-VL's, and Qwen3-VL's and Qwen3-VL-MoE's, whose interleaved M-RoPE rotates
the same ids), and its image
encodings land where mlx-vlm's merge puts them: the numpy rule the engine uses in place of
mlx-vlm's (which syncs the device per image) decides every image token's rotation."""

from __future__ import annotations

from types import SimpleNamespace

import mlx.core as mx
import numpy as np
import pytest
from mlx_responses.service.engine.vision.encoder import _merged
from mlx_responses.service.engine.vision.positions import MRoPE, row_positions
from mlx_vlm.models.qwen2_5_vl.language import LanguageModel as Qwen25LanguageModel
from mlx_vlm.models.qwen2_vl.language import LanguageModel
from mlx_vlm.models.qwen2_vl.qwen2_vl import Model
from mlx_vlm.models.qwen3_vl.language import LanguageModel as Qwen3LanguageModel
from mlx_vlm.models.qwen3_vl_moe.language import LanguageModel as Qwen3MoELanguageModel

IMAGE, VIDEO, START, END = 151655, 151656, 151652, 151653
CONFIG = SimpleNamespace(
    image_token_id=IMAGE,
    video_token_id=VIDEO,
    vision_start_token_id=START,
    vision_config=SimpleNamespace(spatial_merge_size=2),
)


def _prompt(parts: list[object]) -> tuple[list[int], np.ndarray | None]:
    """Text runs (a count of plain tokens) and images (a (t, h, w) grid) in order."""
    tokens: list[int] = []
    grids = []
    for part in parts:
        if isinstance(part, int):
            tokens += [100 + (len(tokens) + k) % 50 for k in range(part)]
        else:
            t, h, w = part  # type: ignore[misc]
            tokens += [START] + [IMAGE] * (t * h * w // 4) + [END]
            grids.append(part)
    return tokens, np.array(grids, dtype=np.int64) if grids else None


PROMPTS = {
    "one image mid-text": [5, (1, 8, 6), 7],
    "two images of different grids": [3, (1, 4, 4), 2, (2, 6, 10), 9],
    "an image first and last, no text after": [(1, 4, 6), 4, (1, 10, 2)],
    "frames in time (t > 1)": [1, (3, 4, 4), 2],
    "text alone (a grid, no image in the text)": [12],
}


LANGUAGES = {
    "qwen2": LanguageModel,
    "qwen2_5": Qwen25LanguageModel,
    "qwen3": Qwen3LanguageModel,
    "qwen3_moe": Qwen3MoELanguageModel,
}


@pytest.mark.parametrize("parts", PROMPTS.values(), ids=PROMPTS.keys())
@pytest.mark.parametrize("language", LANGUAGES.values(), ids=LANGUAGES.keys())
def test_positions_are_get_rope_index_s(parts: list[object], language: type) -> None:
    tokens, grids = _prompt(parts)
    imaged = grids is not None
    grids = grids if imaged else np.array([[1, 4, 4]])
    ids, delta = language.get_rope_index(
        SimpleNamespace(config=CONFIG),  # type: ignore[arg-type]
        mx.array([tokens]),
        mx.array(grids),
    )
    want = row_positions(ids, delta)
    got = MRoPE.of(CONFIG).positions(tokens, grids)
    assert got.delta == want.delta
    length = len(tokens) + 5  # past the prompt: index + delta on both sides
    assert np.array_equal(got.span(0, length), want.span(0, length))
    assert (got.delta != 0) == imaged and (got.table is not None) == imaged


def test_an_image_s_ids_are_its_grid_past_the_text_before_it() -> None:
    tokens, grids = _prompt([2, (1, 4, 6), 1])
    table = MRoPE.of(CONFIG).positions(tokens, grids).span(0, len(tokens))
    # 2 text tokens, <vision_start>, then a 2 x 3 grid of merged patches from id 3.
    assert table[:, 3:9].tolist() == [[3] * 6, [3, 3, 3, 4, 4, 4], [3, 4, 5, 3, 4, 5]]
    assert table[:, 9].tolist() == [6, 6, 6]  # <vision_end>: one past the grid's largest id


def test_encodings_land_where_mlx_vlm_merges_them() -> None:
    image = 199  # a vocabulary of 200: the placeholder is a token like any other
    tokens = [3, 4, image, image, image, 5, image, image, 6]
    table = mx.random.normal((200, 8), key=mx.random.key(0))
    model = SimpleNamespace(
        language_model=SimpleNamespace(model=SimpleNamespace(embed_tokens=lambda ids: table[ids]))
    )
    features = mx.random.normal((5, 8), key=mx.random.key(1))
    ids = mx.array([tokens])
    theirs = Model.merge_input_ids_with_image_features(image, 198, features, table[ids], ids)
    assert mx.array_equal(_merged(model, tokens, features, np.asarray(tokens) == image), theirs[0])
    with pytest.raises(ValueError, match="5 image placeholders for 4"):
        _merged(model, tokens, features[:4], np.asarray(tokens) == image)
