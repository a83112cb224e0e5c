"""Image requests on the shared scheduler: decoded in one batch, their next turn served from the
prompt cache, their greedy tokens those of mlx-vlm's own generate (one request at a time); on
the tiny random Qwen2-VL (tests/support/random_vlm.py), through the HTTP façade."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.models.vision_runtime import VisionRuntime

from tests.http.test_dialect_vision import _encodings
from tests.http.test_vision_text import _png
from tests.support.hold import held_until
from tests.support.mlx_vlm_greedy import mlx_vlm_text
from tests.support.stack import Stack

TOKENS = 10


def _user(text: str, url: str) -> dict[str, Any]:
    parts = [{"type": "input_text", "text": text}, {"type": "input_image", "image_url": url}]
    return {"role": "user", "content": parts}


def _create(stack: Stack, **body: Any) -> dict[str, Any]:
    body = {
        "model": stack.settings.models[0].name,
        "max_output_tokens": TOKENS,
        "temperature": 0,
        **body,
    }
    reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    out: dict[str, Any] = reply.json()
    return out


def _cached(response: dict[str, Any]) -> int:
    return int(response["usage"]["input_tokens_details"]["cached_tokens"])


def _text(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


def _together_as_alone(stack: Stack, requests: list[list[dict[str, Any]]], tokens: int) -> None:
    """`requests` (each its input), sent one at a time and then all at once to a stack without
    a prompt cache: alone, none shares the batch; together, all do, each with its text alone."""

    def create(items: list[dict[str, Any]]) -> str:
        reply = _create(stack, input=items, max_output_tokens=tokens)
        assert reply["usage"]["output_tokens"] == tokens
        assert _cached(reply) == 0
        return _text(reply)

    alone = [create(items) for items in requests]
    assert len(set(alone)) == len(alone), "the images make no difference: a weak test"
    assert stack.engine_stats.max_batch_seen == 1
    assert stack.core is not None
    # Held until all have arrived: the batch forms from what is there, however slow the machine.
    with (
        held_until(stack.core.models.default.runtime.worker, len(requests)),
        ThreadPoolExecutor(len(requests)) as pool,
    ):
        together = list(pool.map(create, requests))
    assert together == alone
    assert stack.engine_stats.max_batch_seen == len(requests)


def _runtime(stack: Stack) -> VisionRuntime:
    assert stack.core is not None
    runtime = stack.core.models.default.runtime
    assert isinstance(runtime, VisionRuntime)
    return runtime


def test_concurrent_image_requests_decode_in_one_batch(vlm_stack: Stack) -> None:
    requests = [[_user(f"Describe picture {k}.", _png(56 + 28 * k, 56, k))] for k in range(4)]
    assert vlm_stack.core is not None
    # Held until all four have arrived, so they are admitted together however slow the machine.
    with (
        held_until(vlm_stack.core.models.default.runtime.worker, 4),
        ThreadPoolExecutor(4) as pool,
    ):
        replies = list(
            pool.map(lambda items: _create(vlm_stack, input=items, max_output_tokens=16), requests)
        )
    assert all(r["usage"]["output_tokens"] == 16 for r in replies)
    assert vlm_stack.engine_stats.max_batch_seen == 4


def _next_turn(stack: Stack, url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stored turn with the image `url` and a text next turn chained on it: the whole first
    turn's prompt (its image included) comes from the prompt cache, and its image, in the
    cached prefix, goes through no tower, not even an encoding read."""
    first = _create(stack, input=[_user("What is in this picture?", url)], store=True)
    encodings = _encodings(stack)
    second = _create(
        stack,
        previous_response_id=first["id"],
        input=[{"role": "user", "content": "And its colours?"}],
    )
    assert _cached(second) >= first["usage"]["input_tokens"] - 1
    assert _encodings(stack) == encodings
    return first, second


def test_the_next_turn_reads_the_image_prefix_from_the_prompt_cache(vlm_stack: Stack) -> None:
    first, second = _next_turn(vlm_stack, _png(112, 84, 7))
    assert second["usage"]["input_tokens"] > first["usage"]["input_tokens"]


def test_another_image_at_the_same_place_is_not_served_from_the_cache(vlm_stack: Stack) -> None:
    """Two images of one size have the same tokens: the cache key tells them apart."""
    text = "A picture to look at closely:"
    first = _create(vlm_stack, input=[_user(text, _png(84, 84, 8))])
    same = _create(vlm_stack, input=[_user(text, _png(84, 84, 8))])
    other = _create(vlm_stack, input=[_user(text, _png(84, 84, 9))])
    n = first["usage"]["input_tokens"]
    assert _cached(same) >= n - 1
    image_tokens = (84 // 28) ** 2
    # Only the text before the image is shared.
    assert 0 < _cached(other) < n - image_tokens
    assert _text(same) == _text(first)  # a cached prefix generates what a fresh one does


def test_batched_greedy_tokens_are_mlx_vlms_own(vlm_stack: Stack) -> None:
    """Four image requests at once, each what mlx-vlm's generate gives it alone (what the
    one-at-a-time engine gave)."""
    from mlx_vlm import load

    runtime = _runtime(vlm_stack)
    requests = [
        [_user(f"Picture {k}, what is it?", _png(28 * (k + 1), 56, 20 + k))] for k in range(4)
    ]
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda items: _create(vlm_stack, input=items), requests))
    reference = load(str(runtime.loaded.path))
    for items, reply in zip(requests, replies, strict=True):
        text, url = items[0]["content"][0]["text"], items[0]["content"][1]["image_url"]
        assert _text(reply) == mlx_vlm_text(vlm_stack, text, url, TOKENS, loaded=reference)


def test_a_text_request_decodes_beside_image_requests_unchanged(vlm_stack: Stack) -> None:
    """Text and image requests of the model share the batch; each row keeps its own positions,
    so the text request's greedy text is what it is alone."""
    text = [{"role": "user", "content": "Tell me a story about a lighthouse."}]
    alone = _text(_create(vlm_stack, input=text, max_output_tokens=48))
    images = [[_user(f"Picture {k}?", _png(84, 56, 40 + k))] for k in range(3)]
    with ThreadPoolExecutor(4) as pool:
        beside = pool.submit(_create, vlm_stack, input=text, max_output_tokens=48)
        others = [pool.submit(_create, vlm_stack, input=i, max_output_tokens=48) for i in images]
        assert _text(beside.result()) == alone
        assert all(o.result()["usage"]["output_tokens"] == 48 for o in others)
