"""--kv-bits: live and prompt-cached sequences hold quantized KV, and generation stays sane."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine.batch.mlx_lm_compat import BatchGenerator
from mlx_responses.service.engine.kv_quant import (
    SequenceQuantizedKVCache,
    kv_group_size,
    new_sequence_cache,
)
from mlx_responses.service.engine.mlx_lm_compat import KVCache
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import EngineStats, SamplingParams
from mlx_responses.service.engine.slots import SlotScheduler
from mlx_responses.service.engine.worker import EngineWorker, device_kind

from tests.support.engine import admit, collect, generate, greedy, step_tokens
from tests.support.random_model import build_random_model

TEXTS = ("hello world " * 20, "short", "the cat sat on the mat " * 5)


@pytest.fixture(scope="module")
def head32_model(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A random model whose head dimension (32) can be quantized in groups of 32."""
    return build_random_model(
        tmp_path_factory.mktemp("kv") / "kv-chat",
        hidden_size=128,
        intermediate_size=256,
        seed=5,
        tokenizer_from=model_path,
    )


@pytest.mark.parametrize("engine", ["batch", "slots"])
async def test_kv_bits_generation_and_prompt_cache_bytes(head32_model: Path, engine: str) -> None:
    requests = greedy(TEXTS, 32)
    # The requests of a turn start as one batch (a wait for the burst): whether the first one
    # started alone (solo, handed over when the next arrived) would change which entries the
    # prompt cache holds, and so the bytes compared below.
    on: dict[str, Any] = {"engine": engine, "batch_wait": 0.05}
    # Two turns: the second is served from prompt-cache entries the first left behind.
    full, fp = await generate(head32_model, requests, turns=2, **on)
    q8_out, q8 = await generate(head32_model, requests, turns=2, kv_bits=8, **on)
    q4_out, q4 = await generate(head32_model, requests, turns=2, kv_bits=4, **on)
    assert q8.cached_tokens > 0 and q8.prompt_cache_hits > 0
    # 8-bit KV barely moves a greedy decode; a broken cache (mask, padding) would derail it.
    for a, b in zip(full, q8_out, strict=True):
        assert sum(x == y for x, y in zip(a, b, strict=True)) >= 0.75 * len(a)
    assert all(len(out) == 32 for out in q4_out)
    # The prompt cache is accounted by what it holds: fp32 ≈ 4 B/value, 8-bit ≈ 1.25, 4-bit ≈ 0.75.
    assert q8.prompt_cache_bytes < 0.4 * fp.prompt_cache_bytes
    assert q4.prompt_cache_bytes < 0.7 * q8.prompt_cache_bytes
    # Alone or in a ragged batch, and with speculation, the quantized decode is the same.
    (single,), _ = await generate(head32_model, requests[:1], kv_bits=8, **on)
    assert single == q8_out[0]
    spec, stats = await generate(head32_model, requests, kv_bits=8, speculative="ngram", **on)
    assert spec == q8_out and stats.accepted_tokens > 0


async def test_the_slots_decode_the_quantized_batch_tokens(head32_model: Path) -> None:
    """Both engines, 4-bit KV (the coarsest, where a slip shows), two turns (the second from
    the quantized prompt-cache entries, mixed in one batch with a fresh prompt)."""
    requests = greedy([*TEXTS, "a fresh one"], 24)
    batch, _ = await generate(head32_model, requests, turns=2, kv_bits=4, engine="batch")
    slots, stats = await generate(head32_model, requests, turns=2, kv_bits=4, engine="slots")
    assert slots == batch
    assert stats.prompt_cache_hits >= len(TEXTS) and stats.max_batch_seen >= 2


async def test_auto_takes_the_slots_with_kv_bits_on_a_cpu(head32_model: Path) -> None:
    """`--engine auto --kv-bits 8` on a CPU: the fixed slots, holding quantized KV (the second
    turn reads the first one's quantized entry, and the cache holds a third of the bytes)."""

    async def run(**worker: Any) -> tuple[str, EngineStats]:
        engine = EngineWorker(lambda: load_model(head32_model), engine="auto", **worker)
        loaded = await engine.start()
        try:
            sampling = SamplingParams(max_tokens=8, temperature=0.0)
            prompt = loaded.tokenizer.encode(TEXTS[0])
            first = await collect(engine.submit(prompt, sampling))
            second = await collect(engine.submit([*prompt, *first, *prompt], sampling))
            assert len(second) == 8
            return engine.engine, engine.stats
        finally:
            engine.stop()

    chosen, q8 = await run(kv_bits=8)
    _, fp = await run()
    # NOTE: on a GPU auto keeps mlx-lm's batch until the slots are measured there.
    assert chosen == ("slots" if device_kind() == "cpu" else "batch")
    assert q8.prompt_cache_hits == 1 and q8.cached_tokens > 0
    assert 0 < q8.prompt_cache_bytes < 0.4 * fp.prompt_cache_bytes


def _argmax(logprobs: mx.array) -> mx.array:
    return mx.argmax(logprobs, axis=-1)


def _prompt(length: int, seed: int) -> list[int]:
    return [(seed * 37 + 11 * j) % 900 + 3 for j in range(length)]


Ends = dict[int, Any]  # uid: its finishing response (prompt_cache, all_tokens)


def _step(generator: Any, out: dict[int, list[int]], ends: Ends) -> None:
    for r in step_tokens(generator):
        out.setdefault(r.uid, []).append(r.token)
        if r.finish_reason is not None:
            ends[r.uid] = r


def _run(generator: Any, uids: list[int], out: dict[int, list[int]] | None = None) -> Any:
    """Steps until every uid finished: (tokens by uid, finishing responses by uid)."""
    out = {} if out is None else out
    ends: Ends = {}
    while not all(uid in ends for uid in uids):
        _step(generator, out, ends)
    return out, ends


def _batch(model: Any, prompts: list[list[int]], caches: list[Any], tokens: int) -> list[Any]:
    """mlx-lm's BatchGenerator's greedy tokens, each prompt alone from its (quantized) cache."""
    want = []
    for prompt, cache in zip(prompts, caches, strict=True):
        generator = BatchGenerator(model, stop_tokens=[], sampler=_argmax, prefill_step_size=2048)
        (uid,) = admit(generator, [prompt], max_tokens=[tokens], caches=[cache])
        want.append(_run(generator, [uid])[0][uid])
        generator.close()
    return want


def _staggered(model: Any, bits: int | None, group: int, prompts: list[list[int]]) -> Any:
    """Two prompts of different lengths, the third prefilled while they decode (12 tokens
    each): the generator, (tokens, ends) by uid, the uids, and the stores' first layer and
    bytes once all three are in."""
    generator = SlotScheduler(
        model,
        stop_tokens=[],
        completion_batch_size=4,
        prefill_batch_size=8,
        prefill_step_size=2048,
        sampler=_argmax,
        kv_bits=bits,
        kv_group=group if bits else None,
    )
    out: dict[int, list[int]] = {}
    uids = admit(generator, prompts[:2], max_tokens=[12, 12])
    for _ in range(3):
        _step(generator, out, {})
    uids += admit(generator, prompts[2:], max_tokens=[12])
    _step(generator, out, {})
    held = generator._stores[0].keys, generator.nbytes
    out, ends = _run(generator, uids, out)
    return generator, out, ends, uids, held


@pytest.mark.parametrize("bits", [8, 4])
def test_the_slots_hold_quantized_keys_and_cache_entries(head32_model: Path, bits: int) -> None:
    """Ragged prompts, a late one prefilled beside running rows: the stores hold mlx.quantize's
    (packed, scales, biases), the bytes that quantization takes, and every row decodes the
    tokens the batch decodes from quantized caches. Each finished sequence leaves a quantized
    entry; the next turn starts from those, and from a plain entry (quantized as restored)."""
    model = load_model(head32_model).model
    group = kv_group_size(model)
    assert group == 32
    prompts = [_prompt(5, 1), _prompt(37, 2), _prompt(19, 3)]
    fresh = [new_sequence_cache(model, group, bits) for _ in prompts]
    want = _batch(model, prompts, fresh, 12)
    _, _, plain_ends, plain_uids, (_, plain_bytes) = _staggered(model, None, group, prompts)
    generator, out, ends, uids, (keys, held) = _staggered(model, bits, group, prompts)
    assert [out[uid] for uid in uids] == want

    packed, scales, biases = keys
    assert packed.dtype == mx.uint32 and packed.shape[-1] == 32 * bits // 32  # head_dim 32
    assert scales.shape[-1] == biases.shape[-1] == 32 // group
    # A value: 4 bytes plain (fp32); bits / 8 quantized, and a scale and a bias per group.
    size = scales.dtype.size
    assert held == plain_bytes * (bits / 8 + 2 * size / group) / size

    # The next turn from the entries: quantized ones (as the batch's), and a plain one.
    entries = [ends[uid] for uid in uids]
    assert all(isinstance(c, SequenceQuantizedKVCache) for e in entries for c in e.prompt_cache)
    plain_entry = plain_ends[plain_uids[1]]
    assert all(type(c) is KVCache for c in plain_entry.prompt_cache)
    starts = [*entries, plain_entry]
    tails = [_prompt(9, 4 + i) for i in range(len(starts))]
    uids = admit(
        generator,
        tails,
        max_tokens=[10] * len(starts),
        caches=[e.prompt_cache for e in starts],
        all_tokens=[e.all_tokens for e in starts],
    )
    out, _ = _run(generator, uids)
    by_hand = []  # the plain entry quantized, for the batch
    for c in plain_entry.prompt_cache:
        q = SequenceQuantizedKVCache(group, bits)
        q.keys, q.values = (
            tuple(mx.quantize(x[:, :, : c.offset], group_size=group, bits=bits))
            for x in (c.keys, c.values)
        )
        q.offset = c.offset
        by_hand.append(q)
    caches = [*(e.prompt_cache for e in entries), by_hand]
    assert [out[uid] for uid in uids] == _batch(model, tails, caches, 10)


@pytest.mark.parametrize("engine", ["batch", "slots"])
async def test_a_lone_sequence_decodes_alone_on_quantized_kv(
    head32_model: Path, engine: str
) -> None:
    """Under --kv-bits a lone request takes the solo path on a quantized cache; a second one
    arriving mid-stream hands it over to the batch (the entry quantized on both sides), and
    each gives the tokens of its quantized decode in the batch alone (solo path off)."""
    texts = ("Count forever", "hello there my friend")
    on = {"engine": engine, "kv_bits": 8, "stream_window": 0.0}
    alone = [
        (await generate(head32_model, greedy([text], 40), solo=False, **on))[0][0] for text in texts
    ]
    outputs, stats = await _handover(head32_model, texts, **on)
    assert outputs == alone
    assert stats.solo_sequences >= 1 and stats.handovers == 1
    # The prompt-cache entries left behind are quantized: ~0.3x what plain fp32 KV leaves.
    _, plain = await _handover(head32_model, texts, engine=engine, stream_window=0.0)
    assert plain.handovers == 1
    assert 0 < stats.prompt_cache_bytes < 0.4 * plain.prompt_cache_bytes


async def _handover(
    path: Path, texts: tuple[str, str], **worker: Any
) -> tuple[list[tuple[int, ...]], EngineStats]:
    """The first text decodes alone for 8 tokens, then the second arrives; both outputs."""
    sampling = SamplingParams(max_tokens=40, temperature=0.0)
    engine = EngineWorker(lambda: load_model(path), **worker)
    loaded = await engine.start()
    try:
        batches = engine.submit(loaded.tokenizer.encode(texts[0]), sampling).batches()
        ids: list[int] = []
        async for chunks in batches:
            ids.extend(t for chunk in chunks for t in chunk.token_ids)
            if len(ids) >= 8:
                break
        assert engine.stats.solo_sequences == 1 and engine.stats.handovers == 0
        second = engine.submit(loaded.tokenizer.encode(texts[1]), sampling)

        async def rest() -> None:
            async for chunks in batches:
                ids.extend(t for chunk in chunks for t in chunk.token_ids)

        _, other = await asyncio.gather(rest(), collect(second))
    finally:
        engine.stop()
    return [tuple(ids), other], engine.stats
