"""Qwen3-VL image requests (a tiny random Qwen3-VL, tests/support/random_qwen3_vl.py, its
deepstack features included) through the HTTP façade: concurrent ones decode in one batch, each
with the text it gets alone, and a next turn reads its image prefix from the prompt cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mlx_vlm")
from tests.http.test_dialect_vision import _encodings
from tests.http.test_vision_batch import _cached, _create, _together_as_alone, _user
from tests.http.test_vision_text import _png
from tests.support.random_qwen3_vl import build_random_qwen3_vl
from tests.support.random_vlm import MEDIA_LIMITS
from tests.support.stack import Stack

TOKENS = 48


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_qwen3_vl(tmp_path_factory.mktemp("tiny-qwen3-vl") / "qwen3-vl")


def _stack(folder: Path, store_url: str, **overrides: Any) -> Iterator[Stack]:
    with Stack.running(model_path=folder, store_url=store_url, **MEDIA_LIMITS, **overrides) as s:
        yield s


@pytest.fixture(scope="module")
def qwen3_stack(qwen3_folder: Path, store_url: str) -> Iterator[Stack]:
    yield from _stack(qwen3_folder, store_url)


@pytest.fixture
def uncached_stack(qwen3_folder: Path, store_url: str) -> Iterator[Stack]:
    """No prompt cache: a request sent twice is prefilled twice, its images encoded twice."""
    yield from _stack(qwen3_folder, store_url, prompt_cache_max_entries=0)


def test_concurrent_qwen3_vl_image_requests_decode_in_one_batch_as_alone(
    uncached_stack: Stack,
) -> None:
    """Three image requests at once share the decode batch (the slots, not one at a time) and
    answer what each answers when sent alone, first (no prompt cache: prefilled again, with
    their images' deepstack features, in the batch)."""
    stack = uncached_stack
    assert stack.core is not None
    assert stack.core.models.default.runtime.worker.engine == "slots"
    requests = [[_user(f"Describe picture {k}.", _png(64 + 32 * k, 64, 60 + k))] for k in range(3)]
    _together_as_alone(stack, requests, TOKENS)


def test_the_next_turn_reads_the_image_prefix_from_the_prompt_cache(qwen3_stack: Stack) -> None:
    """A next turn whose cached prefix holds the image: positions alone, no tower."""
    first = _create(
        qwen3_stack, input=[_user("What is in this picture?", _png(96, 64, 7))], store=True
    )
    encodings = _encodings(qwen3_stack)
    second = _create(
        qwen3_stack,
        previous_response_id=first["id"],
        input=[{"role": "user", "content": "And its colours?"}],
    )
    assert _cached(second) >= first["usage"]["input_tokens"] - 1
    assert second["usage"]["output_tokens"] == 10
    assert _encodings(qwen3_stack) == encodings
