"""A vision-language model's language side, prefilled from embeddings through the slots' KV views
with per-sequence M-RoPE positions, decodes what mlx-vlm's own generate decodes (a tiny random
Qwen2-VL, and a Qwen2.5-VL: its windowed tower, the same language model)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.slots.store import (
    DecodePlan,
    DecodeView,
    PrefillPlan,
    PrefillView,
    Store,
)
from mlx_responses.service.engine.vision.encoder import ImageEncoder, VisionPrompt
from mlx_responses.service.engine.vision.language import VisionLanguage
from mlx_responses.service.engine.vision.positions import (
    MRoPE,
    chunk_positions,
    decode_positions,
)
from PIL import Image

from tests.support.mlx_vlm_greedy import greedy_tokens
from tests.support.random_vlm import IMAGE_PART, build_random_vlm

MAX_TOKENS = 12
REQUESTS = (
    ("Describe " + IMAGE_PART + " now please", ((1, 100, 60),)),
    ("A " + IMAGE_PART + " and " + IMAGE_PART + " compare them", ((2, 56, 56), (3, 112, 90))),
    ("just some text here with no image at all", ()),
)


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen2_5_vl"])
def vlm(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[Any, Any]]:
    from mlx_vlm import load

    folder = build_random_vlm(tmp_path_factory.mktemp(request.param) / "vlm", family=request.param)
    yield load(str(folder))


def _image(seed: int, width: int, height: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8))


def _processed(processor: Any, text: str, sizes: tuple[tuple[int, int, int], ...]) -> dict:
    if not sizes:
        return {"input_ids": np.array([processor.tokenizer.encode(text)])}
    images = [_image(*size) for size in sizes]
    out = processor(text=[text], images=images, return_tensors="np", add_special_tokens=False)
    return {key: np.array(value) for key, value in out.items()}


def _mlx_vlm_greedy(model: Any, processor: Any, arrays: dict) -> list[int]:
    """mlx-vlm's own greedy tokens for a processed prompt (its images' arrays, if any)."""
    return greedy_tokens(
        model,
        processor,
        [int(t) for t in arrays["input_ids"][0]],
        MAX_TOKENS,
        pixel_values=arrays.get("pixel_values"),
        image_grid_thw=arrays.get("image_grid_thw"),
    )


def _requests(
    model: Any, processor: Any, encoder: ImageEncoder
) -> tuple[list[tuple[list[int], VisionPrompt]], list[list[int]]]:
    """`REQUESTS` encoded (their tokens and embeddings), and mlx-vlm's greedy tokens for each."""
    prompts, want = [], []
    for tokens, inputs, arrays in _inputs(processor, REQUESTS):
        want.append(_mlx_vlm_greedy(model, processor, arrays))
        prompts.append(
            (tokens, encoder.prompt(model, tokens, inputs, mrope=MRoPE.of(model.config)))
        )
    return prompts, want


def _inputs(
    processor: Any, requests: Sequence[tuple[str, tuple[tuple[int, int, int], ...]]]
) -> list[tuple[list[int], VisionInputs | None, dict]]:
    """Each request (its text and images' (seed, width, height)) processed: its tokens, its
    images as the engine takes them (None: text alone), and the processor's arrays."""
    out = []
    for k, (text, sizes) in enumerate(requests):
        arrays = _processed(processor, text, sizes)
        tokens = [int(t) for t in arrays["input_ids"][0]]
        inputs = None
        if sizes:
            keys = tuple(f"{k}:{j}" for j in range(len(sizes)))
            inputs = VisionInputs(arrays["pixel_values"], arrays["image_grid_thw"], keys)
        out.append((tokens, inputs, arrays))
    return out


def _slots_greedy(
    model: Any,
    prompts: list[tuple[list[int], VisionPrompt]],
    n_tokens: int,
    chunk: int,
    positioned: bool = True,
) -> list[list[int]]:
    """Every prompt in one batch: each in its slot, prefilled in right-padded chunks from its
    embeddings, then decoded together (as the slot scheduler steps)."""
    language = VisionLanguage(model, n_tokens)
    stores = [Store(len(prompts)) for _ in language.layers]
    rows = list(range(len(prompts)))
    lengths = [0] * len(prompts)
    hidden = prompts[0][1].embeds.shape[-1]
    while todo := [i for i in rows if lengths[i] < len(prompts[i][0]) - 1]:
        sizes = [min(chunk, len(prompts[i][0]) - 1 - lengths[i]) for i in todo]
        width = max(sizes)
        starts = [lengths[i] for i in todo]
        embeds = []
        for i, size in zip(todo, sizes, strict=True):
            part = prompts[i][1].embeds[lengths[i] : lengths[i] + size]
            pad = mx.zeros((width - size, hidden), part.dtype)
            embeds.append(mx.concatenate([part, pad]))
        plan = PrefillPlan(todo, starts, width)
        positions = chunk_positions([prompts[i][1].positions for i in todo], starts, width)
        language(
            mx.zeros((len(todo), width), mx.uint32),
            cache=[PrefillView(store, plan) for store in stores],
            embeds=mx.stack(embeds),
            positions=positions if positioned else None,
        )
        for i, size in zip(todo, sizes, strict=True):
            lengths[i] += size
    current = [tokens[-1] for tokens, _ in prompts]
    out: list[list[int]] = [[] for _ in rows]
    for _ in range(MAX_TOKENS):
        plan = DecodePlan(lengths, rows, None)
        positions = decode_positions([p.positions for _, p in prompts], lengths)
        logits = language(
            mx.array(current, mx.uint32)[:, None],
            cache=[DecodeView(store, plan) for store in stores],
            positions=positions if positioned else None,
        )
        current = mx.argmax(logits[:, -1], axis=-1).tolist()  # type: ignore[assignment]
        for i in rows:
            out[i].append(current[i])
            lengths[i] += 1
    return out


def test_embedding_prefill_in_the_slots_decodes_as_mlx_vlm(vlm: tuple[Any, Any]) -> None:
    """Two image prompts (one with two images) and a text prompt of different lengths, in one
    batch, prefilled in chunks that cut through the images: mlx-vlm's greedy tokens, each."""
    model, processor = vlm
    encoder = ImageEncoder()
    prompts, want = _requests(model, processor, encoder)
    n_tokens = len(processor.tokenizer)
    assert _slots_greedy(model, prompts, n_tokens, chunk=5) == want
    assert _slots_greedy(model, prompts, n_tokens, chunk=64) == want
    # The images' positions matter: without them (text positions) the image prompts part ways.
    unpositioned = _slots_greedy(model, prompts, n_tokens, chunk=64, positioned=False)
    assert unpositioned[2] == want[2]
    assert unpositioned[:2] != want[:2]
    assert encoder.stats.misses == 3


def test_a_resent_image_skips_the_tower(vlm: tuple[Any, Any]) -> None:
    model, processor = vlm
    encoder = ImageEncoder(entries=1)
    text, sizes = REQUESTS[0]
    arrays = _processed(processor, text, sizes)
    tokens = [int(t) for t in arrays["input_ids"][0]]
    inputs = VisionInputs(arrays["pixel_values"], arrays["image_grid_thw"], ("same",))
    first = encoder.prompt(model, tokens, inputs)
    again = encoder.prompt(model, tokens, inputs)
    assert (encoder.stats.misses, encoder.stats.hits, encoder.stats.entries) == (1, 1, 1)
    assert mx.array_equal(first.embeds, again.embeds)
    assert first.positions.delta == again.positions.delta < 0


def _scheduled(
    model: Any,
    prompts: list[tuple[list[int], VisionPrompt]],
    n_tokens: int,
    step: int,
    cached: int = 0,
) -> list[list[int]]:
    """The prompts admitted together into the slot scheduler, with their embeddings and
    positions (each from a prompt-cache entry of its first `cached` tokens, when > 0)."""
    from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
    from mlx_responses.service.engine.scheduler import Admission
    from mlx_responses.service.engine.slots import SlotScheduler

    language = VisionLanguage(model, n_tokens)
    scheduler = SlotScheduler(
        language,
        stop_tokens=[],
        completion_batch_size=4,
        prefill_batch_size=4,
        prefill_step_size=step,
    )
    for uid, (tokens, prompt) in enumerate(prompts):
        cache = None
        if cached:
            # The entry a first pass over the prefix leaves (the model's own plain caches).
            cache = make_prompt_cache(language)
            language(
                mx.array([tokens[:cached]]),
                cache=cache,
                embeds=prompt.embeds[None, :cached],
                positions=mx.array(prompt.positions.span(0, cached)[:, None, :]),
            )
        scheduler.admit(
            Admission(
                uid,
                [tokens[cached:]],
                MAX_TOKENS,
                lambda logprobs: mx.argmax(logprobs, axis=-1),
                cache=cache,
                cached=tokens[:cached],
                embeddings=prompt.embeds[cached:],
                positions=prompt.positions,
            )
        )
    out: list[list[int]] = [[] for _ in prompts]
    while sum(len(o) for o in out) < MAX_TOKENS * len(prompts):
        for token in scheduler.step().tokens:
            out[token.uid].append(token.token)
    return out


@pytest.mark.parametrize(("step", "cached"), [(5, 0), (512, 0), (4, 3)])
def test_the_slot_scheduler_admits_embeddings_and_decodes_as_mlx_vlm(
    vlm: tuple[Any, Any], step: int, cached: int
) -> None:
    """Through `Admission.embeddings` and `.positions`: the same greedy tokens, prefilled in
    chunks, at once, or past a prompt-cache entry of their first tokens."""
    model, processor = vlm
    prompts, want = _requests(model, processor, ImageEncoder())
    assert _scheduled(model, prompts, len(processor.tokenizer), step, cached) == want


@pytest.mark.parametrize(
    "plan", [DecodePlan([3, 7, 5], [0, 1, 2], None), PrefillPlan([0, 2], [4, 9], 6)]
)
def test_mlx_vlm_reads_the_rows_offset_without_a_sync(plan: DecodePlan | PrefillPlan) -> None:
    """mlx-vlm's language models take the rows' shared offset from a cache (its
    `cache_position_offset`) before each forward: from the views it is the plan's largest as a
    Python int, not `offset.max().item()` (which waits for the step before to finish)."""
    from mlx_vlm.models.base import cache_position_offset

    store = Store(3)
    view = DecodeView(store, plan) if isinstance(plan, DecodePlan) else PrefillView(store, plan)
    assert isinstance(view.offset, mx.array)  # rows at several offsets
    largest = int(view.offset.max().item())
    # Offsets it would read there if it read the array.
    view.offset = mx.full(view.offset.shape, -1, mx.int32)
    assert cache_position_offset(view) == largest
