"""Mistral 3 image requests (a tiny random Mistral Small 3.1: Pixtral tower, Mistral language
side, tests/support/random_mistral3.py) through the HTTP façade: concurrent ones of different
image sizes decode in one batch, each with the text it gets alone, and a next turn reads its
image prefix from the prompt cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mlx_vlm")
from tests.http.test_vision_batch import _cached, _create, _next_turn, _together_as_alone, _user
from tests.http.test_vision_qwen import _stack
from tests.http.test_vision_text import _png
from tests.support.random_mistral3 import build_random_mistral3
from tests.support.stack import Stack

TOKENS = 32  # the three are held until all arrive (_together_as_alone), so they overlap


@pytest.fixture(scope="module")
def mistral3_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_mistral3(tmp_path_factory.mktemp("tiny-mistral3") / "mistral3")


@pytest.fixture
def uncached_stack(mistral3_folder: Path, store_url: str) -> Iterator[Stack]:
    """No prompt cache: a request sent twice is prefilled twice, its images encoded twice."""
    yield from _stack(mistral3_folder, store_url, prompt_cache_max_entries=0)


@pytest.fixture
def mistral3_stack(mistral3_folder: Path, store_url: str) -> Iterator[Stack]:
    yield from _stack(mistral3_folder, store_url)


def test_concurrent_mistral3_image_requests_decode_in_one_batch_as_alone(
    uncached_stack: Stack,
) -> None:
    """Three image requests at once (2x3, 2x2 and 4x2 image tokens) share the decode batch (the
    slots, not one at a time) and answer what each answers when sent alone, first."""
    stack = uncached_stack
    assert stack.core is not None
    assert stack.core.models.default.runtime.worker.engine == "slots"
    sizes = [(84, 56), (56, 56), (40, 100)]
    requests = [
        [_user(f"Describe picture {k}.", _png(w, h, 60 + k))] for k, (w, h) in enumerate(sizes)
    ]
    _together_as_alone(stack, requests, TOKENS)


def test_the_next_turn_reads_the_image_prefix_from_the_prompt_cache(
    mistral3_stack: Stack,
) -> None:
    """A next turn's cached prefix holds the image (its rows of image tokens and breaks)."""
    _, second = _next_turn(mistral3_stack, _png(96, 64, 7))
    assert second["usage"]["output_tokens"] == 10


def test_a_next_turn_with_another_image_reads_the_first_from_the_prompt_cache(
    mistral3_stack: Stack,
) -> None:
    """Each image of several rows keys the prompt cache on its own (its rows joined across
    `[IMG_BREAK]`): a next turn that adds an image reads the first turn, image included, from
    the cache, and is what it is without the cache."""
    first = _create(
        mistral3_stack, input=[_user("What is in this picture?", _png(84, 56, 8))], store=True
    )
    turn = [_user("And in this one?", _png(56, 84, 9))]
    second = _create(mistral3_stack, previous_response_id=first["id"], input=turn, store=True)
    assert _cached(second) >= first["usage"]["input_tokens"] - 1
    assert second["usage"]["output_tokens"] == 10
