"""Qwen2.5-VL (Qwen2-VL's language model and positions; a vision tower that reorders an image's
patches by window and attends within each window but in its full-attention blocks) batched on
the slots: image prompts admitted together, their images through the tower in one call
(`encode_together`), prefilled from their embeddings in right-padded chunks that cut through
images, decode what mlx-vlm's own generate decodes, one at a time. On a tiny random Qwen2.5-VL
(tests/support/random_vlm.py, `family="qwen2_5_vl"`) whose windows cut the tests' images."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.engine.vision.encoder import ImageEncoder

from tests.engine.test_vision_deepstack import _requests, _scheduled, _side
from tests.support.random_vlm import build_random_vlm


@pytest.fixture(scope="module")
def qwen25(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    from mlx_vlm import load

    folder = build_random_vlm(tmp_path_factory.mktemp("qwen2.5-vl") / "vlm", family="qwen2_5_vl")
    yield load(str(folder))


def test_its_tower_attends_within_windows_of_the_tests_images(qwen25: tuple[Any, Any]) -> None:
    """The tests' images are cut into several windows (2, 1 and 6, some partial), and the
    windows matter: the same tower attending to each whole image in every block encodes
    them otherwise. So the batch's equality with mlx-vlm below holds through the windows."""
    model, processor = qwen25
    side = _side(model, processor)
    prompts, _ = _requests(model, processor, side)
    inputs = [seen.inputs for _, seen in prompts if seen is not None]
    grids = np.concatenate([i.image_grid_thw for i in inputs])
    tower = model.vision_tower
    _, bounds = tower.get_window_index(mx.array(grids))
    sizes = np.diff(np.unique(np.array(bounds)))
    assert len(sizes) > len(grids) and len(set(sizes.tolist())) > 1
    windowed = ImageEncoder().encode(model, inputs)
    full = tower.fullatt_block_indexes
    tower.fullatt_block_indexes = list(range(len(tower.blocks)))
    try:
        whole = ImageEncoder().encode(model, inputs)
    finally:
        tower.fullatt_block_indexes = full
    for a, b in zip(windowed, whole, strict=True):
        assert a is not None and b is not None
        assert not mx.allclose(a, b, atol=1e-3).item()


@pytest.mark.parametrize(("step", "cached"), [(5, 0), (3, 0), (512, 0), (4, 6), (4, -1)])
def test_qwen2_5_vl_prefill_in_the_slots_decodes_as_mlx_vlm(
    qwen25: tuple[Any, Any], step: int, cached: int
) -> None:
    """Two image prompts (one with two images of different sizes) and a text prompt, in one
    batch: chunks of 3 or 5 tokens cut through the images (rows right-padded), one chunk
    holds each prompt, or each starts past a prompt-cache entry (cut through an image, or
    holding all its images: positions alone past it); mlx-vlm's greedy tokens, each."""
    model, processor = qwen25
    side = _side(model, processor)
    assert side.batched and side.mrope is not None
    prompts, want = _requests(model, processor, side)
    assert _scheduled(side, prompts, step, cached) == want
    if cached >= 0:
        assert side.encoder.stats.tower_calls == 1  # both prompts' images in one call
    assert len({tuple(tokens) for tokens in want}) == len(want), "images make no difference"
