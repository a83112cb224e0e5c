"""Image requests on the Qwen-VL families the slots batch beside Qwen2-VL (test_vision_batch.py)
through the HTTP façade: a tiny random Qwen3-VL and Qwen3-VL-MoE (tests/support/random_qwen3_vl.py,
their deepstack features included) and Qwen2.5-VL (tests/support/random_vlm.py, its windowed
tower): concurrent ones decode in one batch, each with the text it gets alone, and a next turn
reads its image prefix from the prompt cache."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mlx_vlm")
from tests.http.test_vision_batch import _next_turn, _together_as_alone, _user
from tests.http.test_vision_text import _png
from tests.support.random_qwen3_vl import build_random_qwen3_vl
from tests.support.random_vlm import MEDIA_LIMITS, build_random_vlm
from tests.support.stack import Stack

TOKENS = 48
OVERLAP = 32  # tokens; the requests are held until all arrive (_together_as_alone)
BUILDERS: dict[str, Callable[[Path], Path]] = {
    "qwen3_vl": build_random_qwen3_vl,
    "qwen2_5_vl": partial(build_random_vlm, family="qwen2_5_vl"),
    "qwen3_vl_moe": partial(build_random_qwen3_vl, family="qwen3_vl_moe"),
}


@pytest.fixture(scope="module", params=BUILDERS)
def qwen_folder(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    return BUILDERS[request.param](tmp_path_factory.mktemp(f"tiny-{request.param}") / "vlm")


def _stack(folder: Path, store_url: str, **overrides: Any) -> Iterator[Stack]:
    with Stack.running(model_path=folder, store_url=store_url, **MEDIA_LIMITS, **overrides) as s:
        yield s


@pytest.fixture(scope="module")
def qwen_stack(qwen_folder: Path, store_url: str) -> Iterator[Stack]:
    yield from _stack(qwen_folder, store_url)


@pytest.fixture
def uncached_stack(qwen_folder: Path, store_url: str) -> Iterator[Stack]:
    """No prompt cache: a request sent twice is prefilled twice, its images encoded twice."""
    yield from _stack(qwen_folder, store_url, prompt_cache_max_entries=0)


def test_concurrent_image_requests_decode_in_one_batch_as_alone(
    uncached_stack: Stack,
) -> None:
    """Three image requests at once share the decode batch (the slots, not one at a time) and
    answer what each answers when sent alone, first (no prompt cache: prefilled again, with
    Qwen3-VL's images' deepstack features, in the batch)."""
    stack = uncached_stack
    assert stack.core is not None
    assert stack.core.models.default.runtime.worker.engine == "slots"
    requests = [[_user(f"Describe picture {k}.", _png(64 + 32 * k, 64, 60 + k))] for k in range(3)]
    _together_as_alone(stack, requests, OVERLAP)


def test_the_next_turn_reads_the_image_prefix_from_the_prompt_cache(qwen_stack: Stack) -> None:
    """A next turn whose cached prefix holds the image: positions alone, no tower."""
    _, second = _next_turn(qwen_stack, _png(96, 64, 7))
    assert second["usage"]["output_tokens"] == 10
