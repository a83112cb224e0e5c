"""Qwen3.5 as the VLM it is (mlx-vlm's `qwen3_5`: gated-delta linear-attention layers, whose
cache is a recurrent state, beside M-RoPE full-attention layers) batched in mlx-lm's
BatchGenerator (`vision/hybrid.py`): image prompts admitted together, their images through the
tower in one call, prefilled from their embeddings in right-padded chunks that cut through
images, decode what mlx-vlm's own generate decodes, one at a time; so do prompts admitted past
a checkpoint the batch took inside another image prompt (its images in the cached prefix:
positions alone past it). On a tiny random Qwen3.5 and Qwen3.5-MoE
(tests/support/random_qwen3_5_vl.py: the same inputs, its MLPs mixtures of experts)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.engine.batch.scheduler import BatchScheduler
from mlx_responses.service.engine.mlx_lm_compat import ArraysCache
from mlx_responses.service.engine.scheduler import Admission
from mlx_responses.service.engine.vision.hybrid import HybridLanguage
from mlx_responses.service.engine.vision.side import Seen, VisionSide, encode_together

from tests.engine.test_vision_deepstack import MAX_TOKENS, _requests, _side
from tests.support.random_qwen3_5_vl import build_random_qwen3_5_vl


@pytest.fixture(scope="module", params=["qwen3_5", "qwen3_5_moe"])
def qwen35(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[Any, Any]]:
    from mlx_vlm import load

    folder = tmp_path_factory.mktemp(request.param) / "qwen3.5"
    yield load(str(build_random_qwen3_5_vl(folder, family=request.param)))


def _greedy(logprobs: mx.array) -> mx.array:
    return mx.argmax(logprobs, axis=-1)


def _batch(side: VisionSide, step: int) -> BatchScheduler:
    assert isinstance(side.language, HybridLanguage)
    return BatchScheduler(
        side.language,
        stop_tokens=[],
        completion_batch_size=4,
        prefill_batch_size=4,
        prefill_step_size=step,
    )


def _run(scheduler: BatchScheduler, n: int) -> tuple[list[list[int]], int]:
    """Steps until `n` sequences have their tokens: each one's, and the most decoding at once."""
    out: list[list[int]] = [[] for _ in range(n)]
    most = 0
    while sum(len(o) for o in out) < MAX_TOKENS * n:
        for token in scheduler.step().tokens:
            out[token.uid].append(token.token)
        most = max(most, scheduler.decoding)
    return out, most


def _admit(
    scheduler: BatchScheduler,
    prompts: list[tuple[list[int], Seen | None]],
    starts: list[int],
    caches: list[list[Any] | None],
    splits: list[list[int]] | None = None,
) -> None:
    """As the worker admits them (`Seen.admitted`: images encoded together), each past its
    entry's `starts[i]` tokens, cut at `splits[i]` (checkpoints past them)."""
    seens = [seen for _, seen in prompts]
    features = encode_together(list(zip(seens, starts, strict=True)))
    for uid, ((tokens, seen), start, cache, encoded) in enumerate(
        zip(prompts, starts, caches, features, strict=True)
    ):
        rest = tokens[start:]
        cuts = [0, *(splits[uid] if splits else []), len(rest)]
        segments = [rest[a:b] for a, b in itertools.pairwise(cuts)]
        args: dict[str, Any] = seen.admitted(start, encoded) if seen is not None else {}
        scheduler.admit(
            Admission(
                uid,
                segments,
                MAX_TOKENS,
                _greedy,
                cache=cache,
                cached=tokens[:start],
                **args,
            )
        )


def test_qwen3_5_is_batched_in_mlx_lms_batch(qwen35: tuple[Any, Any]) -> None:
    """Its side decodes in mlx-lm's batch, on mlx-lm's caches (a recurrent state per linear
    layer), positioned by M-RoPE; the batch takes its embeddings."""
    model, processor = qwen35
    side = _side(model, processor)
    assert side.batched and side.engine == "batch" and side.mrope is not None
    assert isinstance(side.language, HybridLanguage)
    kinds = [type(c).__name__ for c in side.language.make_cache()]
    assert kinds == ["ArraysCache", "KVCache", "ArraysCache", "KVCache"]
    assert _batch(side, 8).takes_embeddings


@pytest.mark.parametrize("step", [3, 5, 512])
def test_image_prompts_batched_decode_as_mlx_vlm(qwen35: tuple[Any, Any], step: int) -> None:
    """Two image prompts (one with two images of different sizes) and a text prompt admitted
    together: chunks of 3 or 5 tokens cut through the images (rows right-padded, their
    recurrent states masked at their lengths), or one chunk holds each prompt; all three
    decode together, each mlx-vlm's greedy tokens, its images through the tower once."""
    model, processor = qwen35
    side = _side(model, processor)
    prompts, want = _requests(model, processor, side)
    assert len({tuple(tokens) for tokens in want}) == len(want), "images make no difference"
    scheduler = _batch(side, step)
    _admit(scheduler, prompts, [0] * len(prompts), [None] * len(prompts))
    got, most = _run(scheduler, len(prompts))
    assert got == want
    assert most == len(prompts)
    assert side.encoder.stats.tower_calls == 1


def test_checkpoints_inside_image_prompts_serve_their_next_turn(qwen35: tuple[Any, Any]) -> None:
    """The image prompts, batched with checkpoints after their last image and two tokens short
    of their end (`prompt_ends`): each checkpoint is mlx-lm's caches of a text Qwen3.5 (the
    recurrent state copied out of the batch), and the prompts admitted again past their
    checkpoints, together (their images in the cached prefix: no tower, positions alone past
    the last image; or images ahead of an early checkpoint), decode mlx-vlm's tokens."""
    model, processor = qwen35
    side = _side(model, processor)
    prompts, want = _requests(model, processor, side)
    images = [np.flatnonzero(np.asarray(t) == side.image_token) for t, _ in prompts]
    cuts = [
        [int(i[-1]) + 2 if len(i) else 4, len(t) - 2]
        for i, (t, _) in zip(images, prompts, strict=True)
    ]
    # A checkpoint before the second prompt's second image: its next turn encodes that one.
    cuts[1][0] = int(images[1][0]) + 1
    scheduler = _batch(side, 4)
    scheduler.prompt_ends = True
    _admit(scheduler, prompts, [0] * 3, [None] * 3, [[cuts[u][0]] for u in range(3)])
    entries: dict[int, tuple[list[Any], list[int]]] = {}
    out: list[list[int]] = [[] for _ in prompts]
    while sum(len(o) for o in out) < MAX_TOKENS * len(prompts):
        step = scheduler.step()
        for end in step.ends:
            if len(end.tokens) == cuts[end.uid][0]:
                entries[end.uid] = (end.cache, end.tokens)
        for token in step.tokens:
            out[token.uid].append(token.token)
    assert out == want
    assert sorted(entries) == [0, 1, 2]
    for uid, (cache, tokens) in entries.items():
        assert tokens == prompts[uid][0][: cuts[uid][0]]
        assert isinstance(cache[0], ArraysCache) and cache[0][1] is not None
    calls = side.encoder.stats.tower_calls
    again = _batch(side, 4)
    _admit(again, prompts, [cuts[u][0] for u in range(3)], [entries[u][0] for u in range(3)])
    got, most = _run(again, len(prompts))
    assert got == want
    assert most == len(prompts)
    # Only the second prompt's second image lay past its checkpoint (hit in the encoding cache).
    assert side.encoder.stats.tower_calls == calls
