"""Qwen3.5 as the VLM it is (a tiny random mlx-vlm `qwen3_5`, tests/support/random_qwen3_5_vl.py:
hybrid linear and full attention) over the HTTP façade: image requests at once decode in one
batch, each mlx-vlm's own greedy text; a conversation's next turn reads its first turn, image
included, from the prompt cache's checkpoints (no image encoded again), a new conversation
under the same system prompt reads the system turn, and after a restart the disk tier serves an
image prompt's checkpoint."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("mlx_vlm")

from tests.http.test_vision import _metric
from tests.http.test_vision_batch import TOKENS, _cached, _create, _text, _user
from tests.http.test_vision_text import _png
from tests.support.hold import held_until
from tests.support.mlx_vlm_greedy import mlx_vlm_text
from tests.support.random_qwen3_5_vl import build_random_qwen3_5_vl
from tests.support.random_vlm import MEDIA_LIMITS
from tests.support.stack import Stack

SYSTEM = {"role": "system", "content": "You describe pictures carefully and briefly. " * 12}


@pytest.fixture(scope="module")
def qwen35_stack(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[Stack]:
    folder = build_random_qwen3_5_vl(tmp_path_factory.mktemp("tiny-qwen3.5") / "qwen3.5")
    with Stack.running(model_path=folder, store_url=store_url, **MEDIA_LIMITS) as s:
        yield s


def test_image_requests_at_once_are_batched_each_mlx_vlms_text(qwen35_stack: Stack) -> None:
    """Three image requests and a text one at once: they decode together (the batch held more
    than one), and each image request's text is mlx-vlm's greedy text for its prompt."""
    parts = [
        (f"Picture {k}, what is it?", _png(50 + 20 * k, 40, (60 * k, 90, 30))) for k in range(3)
    ]
    want = [mlx_vlm_text(qwen35_stack, text, url, TOKENS) for text, url in parts]
    assert len(set(want)) == len(want), "the images make no difference: a weak test"
    story = [{"role": "user", "content": "Tell me a story about a lighthouse."}]
    assert qwen35_stack.core is not None
    # Held until all four have arrived: the batch forms from what is there, however slow the
    # machine.
    with (
        held_until(qwen35_stack.core.models.default.runtime.worker, 4),
        ThreadPoolExecutor(4) as pool,
    ):
        together = [pool.submit(_create, qwen35_stack, input=[_user(*p)]) for p in parts]
        text = pool.submit(_create, qwen35_stack, input=story)
        assert [_text(f.result()) for f in together] == want
        assert text.result()["usage"]["output_tokens"] == TOKENS
    assert qwen35_stack.engine_stats.max_batch_seen == 4


def test_checkpoints_serve_the_next_turn_and_a_new_conversation(qwen35_stack: Stack) -> None:
    """A first turn (system prompt, one image), then its next turn chained on it: it reads at
    least the first prompt to where its generation prompt began, its image encoded once; a
    new conversation under the same system prompt, another image, reads the system turn."""
    first = _create(
        qwen35_stack,
        input=[SYSTEM, _user("What is in this picture?", _png(90, 60, (200, 30, 90)))],
        store=True,
    )
    misses = _metric(qwen35_stack, "image_encoding_cache_misses")
    second = _create(
        qwen35_stack,
        previous_response_id=first["id"],
        input=[{"role": "user", "content": "And its colours?"}],
    )
    # The generation prompt: `<|im_start|>assistant\n<think>\n` (at most 6 tokens).
    assert _cached(second) >= first["usage"]["input_tokens"] - 6
    assert _metric(qwen35_stack, "image_encoding_cache_misses") == misses
    other = _create(
        qwen35_stack, input=[SYSTEM, _user("And this one?", _png(60, 60, (10, 130, 90)))]
    )
    system_turn = len(
        qwen35_stack.core.models.default.runtime.loaded.tokenizer.apply_chat_template(
            [SYSTEM], tokenize=True
        )
    )
    assert _cached(other) >= system_turn - 2
    assert _cached(other) < other["usage"]["input_tokens"] - 4  # its image and question


def test_a_restart_reads_an_image_prompts_checkpoints_from_disk(
    qwen35_stack: Stack, tmp_path: Path
) -> None:
    """An image request (a system prompt long enough for the disk tier), then the server
    restarted on the same prompt-cache folder, then the same request: it reads all but its last
    token from disk (the recurrent state written and read back), with the same text."""
    assert qwen35_stack.core is not None
    folder = qwen35_stack.core.models.default.runtime.loaded.path
    system = {"role": "system", "content": "Describe every picture in plain words. " * 40}
    items = [system, _user("What is in this picture?", _png(70, 50, (20, 200, 90)))]
    with Stack.running(model_path=folder, prompt_cache_dir=tmp_path, **MEDIA_LIMITS) as stack:
        cold = _create(stack, input=items)
    with Stack.running(model_path=folder, prompt_cache_dir=tmp_path, **MEDIA_LIMITS) as stack:
        warm = _create(stack, input=items)
    assert cold["usage"]["input_tokens"] > 256
    assert _cached(warm) == warm["usage"]["input_tokens"] - 1
    assert _text(warm) == _text(cold)
