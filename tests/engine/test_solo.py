"""A lone sequence decodes outside the batch and joins it, unchanged, when a second one arrives."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_responses.service.engine.batch.mlx_lm_compat import BatchGenerator
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.penalties import penalty_processors
from mlx_responses.service.engine.requests import SamplingParams, TokenLogprob
from mlx_responses.service.engine.slots import SlotScheduler
from mlx_responses.service.engine.solo import SoloSequence
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import admit, collect, generate, greedy, step_tokens

TOKENS = 48


@pytest.mark.parametrize("engine_kind", ["batch", "slots"])
async def test_a_request_arriving_mid_stream_leaves_both_outputs_as_they_are_alone(
    random_model: Path, engine_kind: str
) -> None:
    texts = ("Count forever", "hello there my friend")
    alone = [(await generate(random_model, greedy([text], TOKENS)))[0][0] for text in texts]
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0, logprobs=2)
    engine = EngineWorker(lambda: load_model(random_model), stream_window=0.0, engine=engine_kind)
    loaded = await engine.start()
    try:
        first = engine.submit(loaded.tokenizer.encode(texts[0]), sampling)
        batches = first.batches()
        ids: list[int] = []
        logprobs: list[TokenLogprob] = []

        async def read(until: int) -> None:
            async for chunks in batches:
                for chunk in chunks:
                    assert chunk.finish_reason in (None, "length"), chunk.error
                    ids.extend(chunk.token_ids)
                    logprobs.extend(chunk.logprobs)
                if len(ids) >= until:
                    return

        await read(10)
        head = len(ids)
        assert engine.stats.solo_sequences == 1 and engine.stats.handovers == 0
        second = engine.submit(loaded.tokenizer.encode(texts[1]), sampling)
        _, other = await asyncio.gather(read(TOKENS), collect(second))
    finally:
        engine.stop()
    assert 10 <= head < TOKENS and tuple(ids) == alone[0]
    assert other == alone[1]
    assert engine.stats.handovers == 1 and engine.stats.max_batch_seen == 2
    assert len(logprobs) == TOKENS and all(len(lp.top) == 2 for lp in logprobs)


@pytest.mark.parametrize("engine_kind", ["batch", "slots"])
@pytest.mark.parametrize("steps_alone", [0, 1, 2, 7])
def test_handover_at_any_step_gives_generate_steps_tokens(
    random_model: Path, steps_alone: int, engine_kind: str
) -> None:
    """Solo steps (prefill chunks, then tokens), then the batch (mlx-lm's or the fixed slots)
    from the handover."""
    model, tokenizer = load(str(random_model))
    prompt = tokenizer.encode("The quick brown fox jumps over the lazy dog again and again")
    expected = [t for t, _ in generate_step(mx.array(prompt), model, max_tokens=TOKENS)]
    generator: Any = (
        BatchGenerator(model, stop_tokens=[], completion_batch_size=4)
        if engine_kind == "batch"
        else SlotScheduler(
            model,
            stop_tokens=[],
            completion_batch_size=4,
            prefill_batch_size=4,
            prefill_step_size=512,
        )
    )
    solo = SoloSequence(
        model,
        generator.stream,
        uid=-1,
        prompt=prompt,
        cache=make_prompt_cache(model),
        cached=[],
        sampler=generator.sampler,
        max_tokens=TOKENS,
        stop_tokens=(),
        prefill_step_size=5,  # a few prefill chunks first
    )
    tokens = []
    for _ in range(steps_alone):
        response = solo.step()
        if response is not None:
            tokens.append(response.token)
    prefilling = not solo.decoding
    handover = solo.handover()
    if handover.emitted is not None:
        tokens.append(handover.emitted.token)
    assert prefilling == (handover.emitted is None)
    # The cache holds every token but the one the batch feeds next.
    assert handover.all_tokens + handover.prompt == prompt + tokens
    (uid,) = admit(
        generator,
        [handover.prompt],
        max_tokens=[handover.max_tokens],
        caches=[handover.cache],
        all_tokens=[handover.all_tokens],
        samplers=[handover.sampler],
    )
    finished = False
    while not finished:
        for r in step_tokens(generator):
            assert r.uid == uid
            tokens.append(r.token)
            finished = r.finish_reason is not None
    generator.close()
    assert tokens == expected


async def test_seeded_sampling_is_the_same_alone_and_in_a_batch(random_model: Path) -> None:
    seeded = SamplingParams(max_tokens=TOKENS, temperature=1.0, seed=11)
    request = ("Count forever", seeded, [])
    (alone,), stats = await generate(random_model, [request])
    assert stats.solo_sequences == 1
    together, stats = await generate(random_model, [request, *greedy(["hello there"], TOKENS)])
    assert together[0] == alone
    (batched,), _ = await generate(random_model, [request], solo=False)
    assert batched == alone


async def test_a_solo_turn_fills_the_prompt_cache(random_model: Path) -> None:
    """The second identical turn finds the first one's KV cache (inserted on finish)."""
    outputs, stats = await generate(random_model, greedy(["Count forever"], TOKENS), turns=2)
    assert stats.prompt_cache_hits == 1 and stats.cached_tokens > 0
    (reference,), _ = await generate(random_model, greedy(["Count forever"], TOKENS))
    assert outputs[0] == reference


async def test_processors_and_the_off_switch_keep_sequences_in_the_batch(
    random_model: Path,
) -> None:
    sampling = SamplingParams(max_tokens=8, temperature=0.0)
    penalized = ("Count forever", sampling, penalty_processors(0.5, 0.0))
    (out,), stats = await generate(random_model, [penalized])
    assert len(out) == 8 and stats.solo_sequences == 0
    _, stats = await generate(random_model, greedy(["Count forever"], 8), solo=False)
    assert stats.solo_sequences == 0
    _, stats = await generate(random_model, greedy(["Count forever"], 8))
    assert stats.solo_sequences == 1


@pytest.mark.parametrize("engine_kind", ["batch", "slots"])
async def test_a_batch_down_to_one_sequence_goes_on_alone_unchanged(
    random_model: Path, engine_kind: str
) -> None:
    short, long = greedy(["hello there my friend"], 6), greedy(["Count forever"], TOKENS)
    alone = [(await generate(random_model, r))[0][0] for r in (short, long)]
    outputs, stats = await generate(random_model, [*short, *long], engine=engine_kind)
    assert outputs == alone
    # Alone at first, into the batch when the other came, alone again once it finished.
    assert stats.handovers == 1 and stats.solo_sequences == 2
