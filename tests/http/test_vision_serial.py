"""A vision model of a family the slots do not batch (a tiny random Gemma 3,
tests/support/random_gemma3.py) serves images through the HTTP façade: each request's greedy text
is what mlx-vlm's own generate gives it, and concurrent requests decode one at a time."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("mlx_vlm")

from tests.http.test_vision_batch import _create, _text, _user
from tests.http.test_vision_text import _png
from tests.support.mlx_vlm_greedy import mlx_vlm_text
from tests.support.random_gemma3 import build_random_gemma3
from tests.support.random_vlm import MEDIA_LIMITS
from tests.support.stack import Stack

TOKENS = 10


@pytest.fixture(scope="module")
def gemma3_stack(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[Stack]:
    """A stack on a random Gemma 3: a family the slots do not batch (sliding windows, its own
    attention mask with the images)."""
    folder = build_random_gemma3(tmp_path_factory.mktemp("tiny-gemma3") / "tiny-gemma3")
    with Stack.running(model_path=folder, store_url=store_url, **MEDIA_LIMITS) as s:
        yield s


def test_an_image_request_answers_with_mlx_vlms_greedy_text(gemma3_stack: Stack) -> None:
    items = [_user("What is in this picture?", _png(60, 40, (200, 30, 90)))]
    reply = _create(gemma3_stack, input=items, max_output_tokens=TOKENS)
    assert reply["status"] == "incomplete"  # at its token cap
    assert reply["usage"]["output_tokens"] == TOKENS
    text, url = items[0]["content"][0]["text"], items[0]["content"][1]["image_url"]
    assert _text(reply) == mlx_vlm_text(gemma3_stack, text, url, TOKENS, mask=True)


def test_concurrent_requests_are_served_one_at_a_time(gemma3_stack: Stack) -> None:
    """Three image requests and a text one at once: every one answers, never two decoding
    together, and each image request's text is what it is alone."""
    requests = [[_user(f"Picture {k}?", _png(50 + 10 * k, 40, (30 * k, 90, 60)))] for k in range(3)]
    alone = [_text(_create(gemma3_stack, input=items)) for items in requests]
    assert len(set(alone)) > 1, "the images make no difference: a weak test"
    text = [{"role": "user", "content": "Tell me a story about a lighthouse."}]
    with ThreadPoolExecutor(4) as pool:
        together = [pool.submit(_create, gemma3_stack, input=items) for items in requests]
        story = pool.submit(_create, gemma3_stack, input=text)
        assert [_text(f.result()) for f in together] == alone
        assert story.result()["usage"]["output_tokens"] == TOKENS
    assert gemma3_stack.engine_stats.max_batch_seen == 1
