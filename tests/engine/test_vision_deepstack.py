"""Qwen3-VL (its vision tower's "deepstack" features added to the image tokens' hidden states in
the language model's first layers) batched on the slots: image prompts, prefilled from their
embeddings in right-padded chunks that cut through images, each with the deepstack features of
the image tokens in its chunk, decode what mlx-vlm's own generate decodes, one at a time. On a
tiny random Qwen3-VL and Qwen3-VL-MoE (tests/support/random_qwen3_vl.py: the same inputs, its
language model's MLPs mixtures of experts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.scheduler import Admission
from mlx_responses.service.engine.slots import SlotScheduler
from mlx_responses.service.engine.vision.side import (
    ImageEncoder,
    Seen,
    VisionSide,
    encode_together,
)

from tests.engine.test_vision_prefill import _inputs, _mlx_vlm_greedy
from tests.support.random_qwen3_vl import build_random_qwen3_vl
from tests.support.random_vlm import IMAGE_PART

MAX_TOKENS = 12
REQUESTS = (
    ("Describe " + IMAGE_PART + " now please", ((1, 100, 60),)),
    ("A " + IMAGE_PART + " and " + IMAGE_PART + " compare them", ((2, 64, 64), (3, 128, 96))),
    ("just some text here with no image at all", ()),
)


@pytest.fixture(scope="module", params=["qwen3_vl", "qwen3_vl_moe"])
def qwen3(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[Any, Any, Path]]:
    from mlx_vlm import load

    folder = tmp_path_factory.mktemp(request.param) / "qwen3-vl"
    build_random_qwen3_vl(folder, family=request.param)
    model, processor = load(str(folder))
    yield model, processor, folder


def _side(model: Any, processor: Any) -> VisionSide:
    loaded = SimpleNamespace(model=model, tokenizer=processor.tokenizer, path=Path("/m"))
    side = VisionSide.of(loaded, ImageEncoder())  # type: ignore[arg-type]
    assert side is not None
    return side


def _requests(
    model: Any, processor: Any, side: VisionSide
) -> tuple[list[tuple[list[int], Seen | None]], list[list[int]]]:
    """`REQUESTS` seen by the side (None: text), and mlx-vlm's greedy tokens for each."""
    prompts: list[tuple[list[int], Seen | None]] = []
    want = []
    for tokens, inputs, arrays in _inputs(processor, REQUESTS):
        want.append(_mlx_vlm_greedy(model, processor, arrays))
        prompts.append((tokens, side.see(tokens, inputs)))
    return prompts, want


def _prefix(side: VisionSide, seen: Seen, cached: int) -> list[Any]:
    """A prompt-cache entry of the prompt's first `cached` tokens, as a first pass over them
    leaves it (the model's own plain caches, its image tokens' deepstack features added)."""
    language = side.language
    assert language is not None
    args = seen.admitted(0)
    stack = args.get("deepstack")
    cache = make_prompt_cache(language)
    extra: dict[str, Any] = {}
    if stack is not None:
        visual = stack.mask[:cached]
        extra = {"visual": visual[None], "deepstack": stack.features[:, : int(visual.sum())]}
    language(
        mx.array([seen.prompt[:cached]]),
        cache=cache,
        embeds=args["embeddings"][None, :cached],
        positions=mx.array(args["positions"].span(0, cached)[:, None, :]),
        **extra,
    )
    return cache


def _scheduled(
    side: VisionSide,
    prompts: list[tuple[list[int], Seen | None]],
    step: int,
    cached: int = 0,
    deepstack: bool = True,
) -> list[list[int]]:
    """The prompts admitted together into the slot scheduler as the worker admits them
    (`Seen.admitted`: their images encoded in one call of the tower), each past a prompt-cache
    entry of its first `cached` tokens when > 0 (-1: its tokens up to two past its last image
    token, so the rest is positions alone). `deepstack`: False drops the features."""
    assert side.language is not None
    scheduler = SlotScheduler(
        side.language,
        stop_tokens=[],
        completion_batch_size=4,
        prefill_batch_size=4,
        prefill_step_size=step,
    )
    starts = []
    for tokens, _ in prompts:
        start = cached
        if cached < 0:
            images = np.flatnonzero(np.asarray(tokens) == side.image_token)
            start = int(images[-1]) + 2 if len(images) else 4
        starts.append(start)
    seens = [seen for _, seen in prompts]
    features = encode_together(list(zip(seens, starts, strict=True)))
    for uid, (tokens, seen), start, encoded in zip(
        range(len(prompts)), prompts, starts, features, strict=True
    ):
        args: dict[str, Any] = seen.admitted(start, encoded) if seen is not None else {}
        if not deepstack:
            args.pop("deepstack", None)
        cache = None
        if start:
            cache = make_prompt_cache(side.language)
            if seen is not None:
                cache = _prefix(side, seen, start)
            else:
                side.language(mx.array([tokens[:start]]), cache=cache)
        scheduler.admit(
            Admission(
                uid,
                [tokens[start:]],
                MAX_TOKENS,
                lambda logprobs: mx.argmax(logprobs, axis=-1),
                cache=cache,
                cached=tokens[:start] if start else [],
                **args,
            )
        )
    out: list[list[int]] = [[] for _ in prompts]
    while sum(len(o) for o in out) < MAX_TOKENS * len(prompts):
        for token in scheduler.step().tokens:
            out[token.uid].append(token.token)
    return out


def test_qwen3_vl_is_batched(qwen3: tuple[Any, Any, Path]) -> None:
    model, processor, _ = qwen3
    side = _side(model, processor)
    assert side.batched and side.language is not None and side.mrope is not None


@pytest.mark.parametrize(("step", "cached"), [(5, 0), (3, 0), (512, 0), (4, 6), (4, -1)])
def test_deepstack_prefill_in_the_slots_decodes_as_mlx_vlm(
    qwen3: tuple[Any, Any, Path], step: int, cached: int
) -> None:
    """Two image prompts (one with two images) and a text prompt, in one batch: chunks of 3
    or 5 tokens cut through the images (rows right-padded), one chunk holds each prompt, or
    each starts past a prompt-cache entry (cut through an image, or holding all its images:
    positions alone past it); mlx-vlm's greedy tokens, each."""
    model, processor, _ = qwen3
    side = _side(model, processor)
    prompts, want = _requests(model, processor, side)
    assert _scheduled(side, prompts, step, cached) == want
    if cached >= 0:
        assert side.encoder.stats.tower_calls == 1  # both prompts' images in one call


def test_without_the_deepstack_features_the_image_prompts_part_ways(
    qwen3: tuple[Any, Any, Path],
) -> None:
    """The deepstack features matter: the same batch without them decodes otherwise (the
    text prompt alone as before)."""
    model, processor, _ = qwen3
    side = _side(model, processor)
    prompts, want = _requests(model, processor, side)
    dropped = _scheduled(side, prompts, 5, deepstack=False)
    assert dropped[2] == want[2]
    assert dropped[0] != want[0] and dropped[1] != want[1]


@pytest.mark.parametrize("qwen3", ["qwen3_vl_moe"], indirect=True)
def test_qwen3_vl_moe_attention_reads_the_rows_largest_offset_as_an_int(
    qwen3: tuple[Any, Any, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """mlx-vlm's Qwen3-VL-MoE attention cuts its mask at its cache's offset and, where that is
    the rows' offsets (an array: rows at different lengths), takes their largest with
    `.item()`, a sync in every layer that waits for the step queued before: the slots show it
    the largest as an int (`language.INT_OFFSET`), the rows' own positions in `positions` (the
    batches above decode mlx-vlm's tokens so)."""
    from mlx_vlm.models.qwen3_vl_moe import language

    model, processor, _ = qwen3
    assert model.config.model_type == "qwen3_vl_moe"
    seen: list[tuple[bool, bool]] = []  # (the view's offsets an array, the offset it read one)
    attend = language.Attention.__call__

    def spy(self: Any, x: mx.array, mask: Any = None, cache: Any = None, **kw: Any) -> mx.array:
        view = getattr(cache, "_view", cache)
        seen.append((isinstance(view.offset, mx.array), isinstance(cache.offset, mx.array)))
        return attend(self, x, mask, cache, **kw)

    monkeypatch.setattr(language.Attention, "__call__", spy)
    side = _side(model, processor)
    prompts, want = _requests(model, processor, side)
    assert _scheduled(side, prompts, 5) == want
    assert (True, False) in seen  # rows at different offsets, read as one int
    assert not any(read for _, read in seen)
