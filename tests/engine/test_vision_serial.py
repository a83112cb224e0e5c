"""A vision model is served one sequence at a time behind the scheduler protocol
(`vision/serial.py`, for the families the slots do not batch: a random Gemma 3 here, and a random
LLaVA, which the slots batch too), decoding what mlx-vlm's own generate decodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.scheduler import Admission, Token
from mlx_responses.service.engine.vision.serial import VisionSerialScheduler
from mlx_responses.service.models.vision_tokens import _processed
from PIL import Image

from tests.support import random_gemma3, random_llava
from tests.support.mlx_vlm_greedy import greedy_tokens

MAX_TOKENS = 10
# Each family: its builder, how a prompt spells an image, and the image's tokens.
FAMILIES = {
    "gemma3": (random_gemma3.build_random_gemma3, random_gemma3.BOI, random_gemma3.IMAGE_TOKENS),
    "llava": (random_llava.build_random_llava, random_llava.IMAGE_TOKEN, random_llava.IMAGE_TOKENS),
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Any, str, int]]:
    """A random model of the family loaded by mlx-vlm, its image part and image tokens."""
    from mlx_vlm import load

    build, part, tokens = FAMILIES[request.param]
    folder = build(tmp_path_factory.mktemp(request.param) / request.param)
    model, processor = load(str(folder))
    yield model, processor, part, tokens


def _image(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (40 + seed, 60, 3), dtype=np.uint8))


def _greedy(logprobs: mx.array) -> mx.array:
    return mx.argmax(logprobs, axis=-1)


def _mlx_vlm_greedy(
    model: Any,
    processor: Any,
    ids: list[int],
    pixels: np.ndarray | None = None,
    max_tokens: int = MAX_TOKENS,
    *,
    extra: dict[str, np.ndarray] | None = None,
) -> list[int]:
    """mlx-vlm's own greedy tokens for a prompt, with the attention mask its processor gives;
    `extra`: the processor's other arrays (Mistral 3's `image_sizes`)."""
    return greedy_tokens(
        model, processor, ids, max_tokens, mask=True, pixel_values=pixels, **(extra or {})
    )


def test_serial_scheduler_decodes_as_mlx_vlm_one_at_a_time(
    family: tuple[Any, Any, str, int],
) -> None:
    """Three sequences admitted at once (two image prompts, one text): the first decodes to its
    end before the next starts, and each decodes mlx-vlm's own greedy tokens."""
    model, processor, part, image_tokens = family
    texts = (f"Describe {part} now please", f"What is in {part} here?")
    prompts: list[tuple[list[int], VisionInputs | None]] = []
    want = []
    for k, text in enumerate(texts):
        arrays = _processed(processor, text, [_image(k)])
        ids = [int(t) for t in arrays["input_ids"][0]]
        assert sum(1 for t in ids if t == model.config.image_token_index) == image_tokens
        want.append(_mlx_vlm_greedy(model, processor, ids, arrays["pixel_values"]))
        prompts.append((ids, VisionInputs(arrays["pixel_values"], None, (f"{k}",))))
    text_ids = processor.tokenizer.encode("just some text, no image", add_special_tokens=False)
    want.append(_mlx_vlm_greedy(model, processor, text_ids))
    prompts.append((text_ids, None))
    assert want[0] != want[1], "the images make no difference: a weak test"

    scheduler = VisionSerialScheduler(
        model, n_tokens=len(processor.tokenizer), stop_tokens=(), prefill_step_size=3
    )
    for uid, (ids, images) in enumerate(prompts):
        scheduler.admit(Admission(uid, [ids], MAX_TOKENS, _greedy, images=images))
    assert (scheduler.waiting, scheduler.decoding, scheduler.nbytes) == (3, 0, 0)
    got: dict[int, list[int]] = {uid: [] for uid in range(len(prompts))}
    order: list[Token] = []
    while scheduler.waiting or scheduler.decoding:
        for token in scheduler.step().tokens:
            got[token.uid].append(token.token)
            order.append(token)
        assert scheduler.decoding <= 1
        assert (scheduler.nbytes > 0) == bool(scheduler.decoding)  # its live KV, counted
    assert [got[uid] for uid in range(len(prompts))] == want
    # One at a time, in arrival order, each ending at its token cap.
    assert [t.uid for t in order] == [uid for uid in got for _ in range(MAX_TOKENS)]
    assert [t.finish_reason for t in order if t.finish_reason] == ["length"] * len(prompts)


def test_serial_scheduler_drops_a_queued_and_the_running_sequence(
    family: tuple[Any, Any, str, int],
) -> None:
    """A cancelled sequence, running or waiting, is gone: the next one runs."""
    model, processor, _, _ = family
    ids = processor.tokenizer.encode("a text prompt", add_special_tokens=False)
    scheduler = VisionSerialScheduler(
        model, n_tokens=len(processor.tokenizer), stop_tokens=(), prefill_step_size=64
    )
    for uid in range(3):
        scheduler.admit(Admission(uid, [ids], MAX_TOKENS, _greedy))
    assert [t.uid for t in scheduler.step().tokens] == [0]
    scheduler.drop([0, 1])
    assert (scheduler.waiting, scheduler.decoding) == (1, 0)
    assert [t.uid for t in scheduler.step().tokens] == [2]
    scheduler.close()
    assert (scheduler.waiting, scheduler.decoding) == (0, 0)
