"""A model whose config declares a sliding window (Qwen's `use_sliding_window`) is served with it.

mlx-lm's qwen3 ignores the declaration and attends to every position; the reference here is
mlx-lm's own generation with a rotating KV cache of the window's size in every layer, which is
the attention Hugging Face's Qwen3 computes for such a config.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import KVCache, RotatingKVCache
from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.model import LoadedModel, load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.slots import layer_windows
from mlx_responses.service.engine.worker import EngineWorker, device_kind

from tests.engine.test_slots import _batch_generator, _prompt, _run, _slots
from tests.support.engine import admit, collect, generate, greedy, step_tokens
from tests.support.random_model import build_random_model

WINDOW = 16
TOKENS = 40
TEXTS = (
    "The quick brown fox jumps over the lazy dog again and again and again",
    "hello there my friend, how are you today?",
)
LONG = (
    "Once upon a time, in a village by the sea, there lived an old fisherman who told the "
    "children stories of storms, of ships and of the lights that danced on the water at night."
)


@pytest.fixture(scope="module")
def windowed_model(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    return build_random_model(
        tmp_path_factory.mktemp("windowed") / "windowed",
        seed=5,
        tokenizer_from=model_path,
        sliding_window=WINDOW,
    )


def _reference(
    path: Path, text: str | list[int], *, window: int | None, tokens: int = TOKENS
) -> tuple[int, ...]:
    """mlx-lm's greedy tokens with a rotating cache of `window` (None: a plain cache)."""
    model, tokenizer = load(str(path))  # mlx-lm's qwen3: no window of its own
    prompt = tokenizer.encode(text) if isinstance(text, str) else text
    cache = None if window is None else [RotatingKVCache(window) for _ in model.layers]
    steps = generate_step(mx.array(prompt), model, max_tokens=tokens, prompt_cache=cache)
    return tuple(t for t, _ in steps)


@pytest.mark.parametrize("engine", ["batch", "slots"])
async def test_a_lone_sequence_attends_over_the_window(windowed_model: Path, engine: str) -> None:
    expected = _reference(windowed_model, TEXTS[0], window=WINDOW)
    assert len(load_model(windowed_model).tokenizer.encode(TEXTS[0])) > WINDOW
    assert expected != _reference(windowed_model, TEXTS[0], window=None)  # the window matters
    (alone,), stats = await generate(windowed_model, greedy(TEXTS[:1], TOKENS), engine=engine)
    assert stats.solo_sequences == 1 and alone == expected


@pytest.mark.parametrize("engine", ["batch", "slots"])
async def test_batched_sequences_attend_over_the_window(windowed_model: Path, engine: str) -> None:
    """Two prompts of different lengths (left-padded, or in slots) decode together, each as
    alone."""
    expected = [_reference(windowed_model, text, window=WINDOW) for text in TEXTS]
    together, stats = await generate(
        windowed_model, greedy(TEXTS, TOKENS), solo=False, engine=engine
    )
    assert stats.max_batch_seen == 2 and together == expected
    # A lone sequence handed to the batch when the second arrives keeps its window too (on
    # slots: its rotating cache, wrapped past the window, copied into a slot; the last one
    # left copied out of its slot to decode alone).
    together, stats = await generate(windowed_model, greedy(TEXTS, TOKENS), engine=engine)
    assert together == expected


@pytest.mark.parametrize("engine", ["batch", "slots"])
async def test_a_lone_sequence_moves_in_and_out_past_the_window(
    windowed_model: Path, engine: str
) -> None:
    """A lone sequence past its window (its rotating cache wrapped) is handed to the batch
    when a second arrives, and decodes alone again once that one has finished."""
    long_one = greedy((LONG,), 3 * TOKENS)[0][1]
    expected = [
        _reference(windowed_model, LONG, window=WINDOW, tokens=3 * TOKENS),
        _reference(windowed_model, TEXTS[1], window=WINDOW, tokens=8),
    ]
    engine_worker = EngineWorker(
        lambda: load_model(windowed_model), stream_window=0.0, engine=engine
    )
    loaded = await engine_worker.start()
    try:
        first = engine_worker.submit(loaded.tokenizer.encode(LONG), long_one)
        seen = 0
        tokens: tuple[int, ...] = ()
        async for chunks in first.batches():
            tokens += tuple(t for c in chunks for t in c.token_ids)
            if seen == 0 and len(tokens) >= 2 * WINDOW:
                seen = 1
                second = engine_worker.submit(
                    loaded.tokenizer.encode(TEXTS[1]), greedy(TEXTS, 8)[1][1]
                )
                task = asyncio.ensure_future(collect(second))
        other = await task
    finally:
        engine_worker.stop()
    assert [tokens, other] == expected
    assert engine_worker.stats.handovers == 1 and engine_worker.stats.solo_sequences == 2


@pytest.mark.parametrize(
    ("worker", "warning"),
    [
        ({"speculative": "ngram"}, "--speculative ngram has no effect on windowed"),
        ({"kv_bits": 8}, "--kv-bits ignored"),
    ],
)
async def test_speculation_and_kv_bits_leave_the_window_as_it_is(
    windowed_model: Path, worker: dict[str, Any], warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither applies to mlx-lm's rotating caches (the batch engine): the sequences decode
    plainly, window intact, and the startup log says so."""
    expected = [_reference(windowed_model, text, window=WINDOW) for text in TEXTS]
    with caplog.at_level(logging.WARNING):
        together, stats = await generate(windowed_model, greedy(TEXTS, TOKENS), **worker)
    assert together == expected and stats.verify_steps == 0
    assert warning in caplog.text


async def test_the_slots_speculate_within_a_window(
    windowed_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On the slots a rejected draft is a length not advanced, whatever the window: n-gram
    speculation runs on a windowed model (the batch engine cannot rewind its rotating caches)
    and decodes as mlx-lm's rotating caches do, long past the window."""
    expected = [_reference(windowed_model, text, window=WINDOW) for text in TEXTS]
    worker = {"speculative": "ngram", "engine": "slots", "prompt_cache_max_entries": 0}
    with caplog.at_level(logging.WARNING):
        together, stats = await generate(windowed_model, greedy(TEXTS, TOKENS), **worker)
    assert together == expected
    assert stats.verify_steps > 0 and stats.accepted_tokens > 0
    assert "no effect" not in caplog.text


@pytest.mark.parametrize("engine", ["batch", "slots"])
async def test_a_next_turn_reuses_the_windowed_prompt_cache(
    windowed_model: Path, engine: str
) -> None:
    """The next turn extends the last one (its prompt, its output, more words): its cache is
    reused, however far the window has rotated, and decodes as a fresh window would."""
    engine_worker = EngineWorker(
        lambda: load_model(windowed_model),
        stream_window=0.0,
        max_prefill_tokens_per_step=8,
        engine=engine,
    )
    loaded = await engine_worker.start()
    try:
        first = loaded.tokenizer.encode(TEXTS[0])
        answer = await collect(engine_worker.submit(first, greedy(TEXTS, TOKENS)[0][1]))
        second = [*first, *answer, *loaded.tokenizer.encode(" and then what?")]
        continued = await collect(engine_worker.submit(second, greedy(TEXTS, TOKENS)[0][1]))
    finally:
        engine_worker.stop()
    stats = engine_worker.stats
    assert stats.prompt_cache_hits == 1 and stats.cached_tokens > WINDOW
    assert continued == _reference(windowed_model, second, window=WINDOW)


async def _served(
    engine: EngineWorker, prompt: list[int], checkpoints: tuple[int, ...] = ()
) -> tuple[tuple[int, ...], int]:
    """One greedy generation (with `checkpoints`): its ids, and the prompt tokens the prompt
    cache served."""
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    ids: tuple[int, ...] = ()
    cached = -1
    async for chunks in engine.submit(prompt, sampling, (), checkpoints).batches():
        for chunk in chunks:
            assert chunk.finish_reason in (None, "stop", "length"), chunk.error
            cached = chunk.cached_tokens if cached < 0 else cached
            ids += chunk.token_ids
    return ids, cached


async def _one_by_one(
    path: Path, prompts: list[list[int]], checkpoints: tuple[int, ...] = (), **worker: Any
) -> tuple[list[tuple[tuple[int, ...], int]], Any]:
    """Each prompt served (`_served`) once the last one finished; and the engine's stats."""
    engine = EngineWorker(lambda: load_model(path), **worker)
    await engine.start()
    try:
        results = [await _served(engine, prompt, checkpoints) for prompt in prompts]
    finally:
        engine.stop()
    return results, engine.stats


PATHS = [("batch", True), ("batch", False), ("slots", True), ("slots", False)]


@pytest.mark.parametrize(("engine", "solo"), PATHS)
async def test_a_repeated_prompt_is_served_from_where_its_prefill_ended(
    windowed_model: Path, engine: str, solo: bool
) -> None:
    """A prompt past the window sent again (a retry; Codex's warm-up, then its turn): the
    finished turn's entry cannot be trimmed back to the prompt once the window rotated, so the
    prefill left one of its own, the prompt but its last token; the repeat is served from it
    and decodes the same tokens, on each path (alone, batched, slots)."""
    prompt = load_model(windowed_model).tokenizer.encode(LONG)
    assert len(prompt) > 2 * WINDOW
    ((first, cold), (again, warm)), stats = await _one_by_one(
        windowed_model, [prompt, prompt], engine=engine, solo=solo, prefill_step_size=8
    )
    assert (cold, warm) == (0, len(prompt) - 1)
    assert first == again == _reference(windowed_model, LONG, window=WINDOW)
    # The first prompt's entries but its last token and whole, the repeat's whole one.
    assert stats.prompt_checkpoints == 3 and stats.prompt_cache_hits == 1


@pytest.mark.parametrize(("engine", "solo"), PATHS)
async def test_a_next_turn_rendering_the_reply_anew_is_served_from_the_prompt(
    windowed_model: Path, engine: str, solo: bool
) -> None:
    """The next turn carries the reply as the template renders it, not as the model wrote it
    (reasoning dropped, another end of turn): it parts from the finished turn's entry inside
    the reply, and is served from the entry the last prompt left once it was in whole (before
    its first token was fed)."""
    tokenizer = load_model(windowed_model).tokenizer
    prompt = tokenizer.encode(LONG)
    second = [*prompt, *tokenizer.encode(" a reply the model did not write, and then what?")]
    ((_, cold), (continued, warm)), _ = await _one_by_one(
        windowed_model, [prompt, second], engine=engine, solo=solo, prefill_step_size=8
    )
    assert (cold, warm) == (0, len(prompt))
    assert continued == _reference(windowed_model, second, window=WINDOW)


@pytest.mark.parametrize(("engine", "solo"), PATHS)
async def test_a_new_conversation_is_served_from_the_system_turn_it_shares(
    windowed_model: Path, engine: str, solo: bool
) -> None:
    """Two conversations under one system turn longer than the window (an agent's instructions
    and tools): the first prompt's prefill leaves an entry where that turn ends (its
    checkpoint), and the second, which parts from the first right after it, is served from
    there; each prefill ends a chunk there, whatever the chunk size."""
    tokenizer = load_model(windowed_model).tokenizer
    system = tokenizer.encode(LONG)
    first = [*system, *tokenizer.encode(" Where is the village?")]
    second = [*system, *tokenizer.encode(" Tell me of the storms and the ships.")]
    ((_, cold), (continued, warm)), stats = await _one_by_one(
        windowed_model,
        [first, second],
        checkpoints=(len(system),),
        engine=engine,
        solo=solo,
        prefill_step_size=7,
    )
    assert (cold, warm) == (0, len(system))
    assert continued == _reference(windowed_model, second, window=WINDOW)
    # The first prompt's system turn and ends (but its last token, and whole), the second's
    # ends (its system turn was cached).
    assert stats.prompt_checkpoints == 5


@pytest.mark.parametrize("engine", ["batch", "slots"])
async def test_a_prefill_handed_to_the_batch_still_leaves_its_system_turn_entry(
    windowed_model: Path, engine: str
) -> None:
    """A lone prompt starts on the solo path; a second request arrives before its prefill
    reaches the system turn's end (chunks of 4 tokens), so the batch goes on with it and takes
    the entry there: a new conversation under that system turn is served from it."""
    worker = EngineWorker(lambda: load_model(windowed_model), engine=engine, prefill_step_size=4)
    tokenizer = (await worker.start()).tokenizer
    system = tokenizer.encode(LONG)
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    try:
        first = worker.submit([*system, *tokenizer.encode(" Where?")], sampling, (), (len(system),))
        other = worker.submit(tokenizer.encode("hello there"), sampling)
        await asyncio.gather(collect(first), collect(other))
        assert worker.stats.handovers == 1
        again = [*system, *tokenizer.encode(" Tell me of the storms.")]
        _, cached = await _served(worker, again, (len(system),))
    finally:
        worker.stop()
    assert cached == len(system)


async def test_prompts_joining_a_decode_prefill_without_one_token_pieces(
    windowed_model: Path,
) -> None:
    """While a sequence decodes, the worker's step budget hands each prompt a chunk wider than
    the prefill step. mlx-lm's prompt batch cut a chunk into pieces of that step, and a last
    piece of one token under right padding (chunks of 29, 40, 56 and 69 tokens in pieces of 4)
    made `BatchRotatingKVCache` raise, failing every request (prefill_batch.py)."""
    worker = EngineWorker(
        lambda: load_model(windowed_model), engine="batch", solo=False, prefill_step_size=4
    )
    tokenizer = (await worker.start()).tokenizer
    text = tokenizer.encode(LONG + " " + LONG)
    prompts = [text[:n] for n in (30, 41, 57, 70)]
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    try:
        decoding = worker.submit(
            tokenizer.encode("hello"), SamplingParams(max_tokens=200, temperature=0.0)
        )
        batches = decoding.batches()
        await anext(batches)  # it decodes now
        joined = await asyncio.gather(*(collect(worker.submit(p, sampling)) for p in prompts))
        async for _ in batches:
            pass
    finally:
        worker.stop()
    assert worker.stats.prefill_tokens_while_decoding > 0
    assert joined == [_reference(windowed_model, p, window=WINDOW) for p in prompts]


async def test_trimmable_caches_leave_no_prompt_entries(windowed_model: Path) -> None:
    """Without a window every entry can be cut back to where a prompt parts from it: the
    finished turn's entry serves the repeat, and prefills leave none of their own."""
    plain = build_random_model(
        windowed_model.parent / "plain", seed=5, tokenizer_from=windowed_model
    )
    prompt = load_model(plain).tokenizer.encode(LONG)
    ((_, cold), (_, warm)), stats = await _one_by_one(plain, [prompt, prompt], solo=False)
    assert (cold, warm, stats.prompt_checkpoints) == (0, len(prompt) - 1, 0)


# --- the slots engine (`--engine slots`) ----------------------------------------------------


async def test_slots_attend_over_the_window_as_the_batch_generator(windowed_model: Path) -> None:
    """Prompts longer than the window, arriving while others decode, prefilled in chunks
    smaller than a prompt, decode on slots what the default engine decodes with the window."""
    texts = (*TEXTS, LONG)
    expected = [_reference(windowed_model, text, window=WINDOW) for text in texts]
    # Without the window the tokens differ: the slots' masks are what keeps it.
    assert expected[0] != _reference(windowed_model, texts[0], window=None)
    batch, _ = await generate(windowed_model, greedy(texts, TOKENS), solo=False)
    assert batch == expected
    engine = EngineWorker(
        lambda: load_model(windowed_model),
        engine="slots",
        prefill_step_size=8,
        max_prefill_tokens_per_step=8,
        prompt_cache_max_entries=0,
    )
    loaded = await engine.start()
    try:
        streams = []
        for text, sampling, _ in greedy(texts, TOKENS):
            streams.append(engine.submit(loaded.tokenizer.encode(text), sampling))
            await asyncio.sleep(0.02)  # each joins a batch already decoding
        together = list(await asyncio.gather(*(collect(s) for s in streams)))
    finally:
        engine.stop()
    assert together == expected
    assert engine.stats.max_batch_seen >= 2 and engine.stats.prefill_tokens_while_decoding > 0


def _without_window(path: Path) -> Any:
    """The same weights, attending to every position (mlx-lm's qwen3 as it is)."""
    model, _ = load(str(path))
    return model


def test_slots_chunked_staggered_and_restored_past_the_window(windowed_model: Path) -> None:
    """SlotScheduler against mlx-lm's BatchGenerator on the windowed model: prompts of 1 to
    4 windows, chunks of 7 tokens, late arrivals into a running batch, and prompt-cache
    entries (the slots' own, and a wrapped mlx-lm RotatingKVCache) restored and continued
    past the window."""
    model = load_model(windowed_model).model
    prompts = [_prompt(n, i) for i, n in enumerate((5, 23, 61, 40))]
    want = _batch_generator(model, prompts, 30)
    plain = _without_window(windowed_model)
    assert _batch_generator(plain, prompts, 30) != want  # the window matters here

    for step in (2048, 7):
        generator = _slots(model, step=step)
        uids = admit(generator, prompts[:2], max_tokens=[30, 30])
        out: dict[int, list[int]] = {uid: [] for uid in uids}
        while len(out[uids[0]]) < 3:  # the late ones join a running batch
            for r in step_tokens(generator):
                out[r.uid].append(r.token)
        uids += admit(generator, prompts[2:], max_tokens=[30, 30])
        out |= {uid: [] for uid in uids[2:]}
        while any(len(out[uid]) < 30 for uid in uids):
            for r in step_tokens(generator):
                out[r.uid].append(r.token)
        assert [out[uid] for uid in uids] == want, step

    # A first turn on slots (60 positions: the window rotated), then a second turn from its
    # entry, beside a fresh prompt, in chunks.
    warm = _slots(model)
    admit(warm, [_prompt(40, 7)], max_tokens=[20])
    entry: list[Any] = []
    while not entry:
        entry = [r for r in step_tokens(warm) if r.finish_reason is not None]
    cache, cached = entry[0].prompt_cache, entry[0].all_tokens
    assert cache is not None and cached is not None and len(cached) == 60
    assert all(isinstance(c, RotatingKVCache) and c.keys.shape[2] == WINDOW for c in cache)
    # mlx-lm's own rotating cache, wrapped mid-ring: 70 positions, the last 20 one by one.
    ring_tokens = _prompt(70, 8)
    ring = [RotatingKVCache(WINDOW) for _ in model.layers]
    model(mx.array([ring_tokens[:50]]), cache=ring)
    for token in ring_tokens[50:]:
        model(mx.array([[token]]), cache=ring)
    mx.eval([c.state[:2] for c in ring])
    assert 0 < ring[0].state[5] < WINDOW  # its write index: the ring has wrapped

    follow_ups = [[*cached, *_prompt(25, 9)], [*ring_tokens, *_prompt(9, 10)], _prompt(33, 11)]
    want = [_batch_generator(model, [p], 24)[0] for p in follow_ups]
    assert [_batch_generator(plain, [p], 24)[0] for p in follow_ups] != want
    generator = _slots(model, step=7)
    uids = admit(
        generator,
        [follow_ups[0][len(cached) :], follow_ups[1][len(ring_tokens) :], follow_ups[2]],
        max_tokens=[24] * 3,
        caches=[cache, ring, None],
        all_tokens=[cached, ring_tokens, []],
    )
    out = _run(generator, uids)
    assert [out[uid] for uid in uids] == want


def _mixed(loaded: LoadedModel) -> LoadedModel:
    """The model with one sliding layer and the rest plain (as gemma3's make_cache)."""

    def make_cache() -> list[Any]:
        return [RotatingKVCache(WINDOW), *(KVCache() for _ in loaded.model.layers[1:])]

    loaded.model.make_cache = make_cache
    return loaded


async def test_the_slots_engine_refuses_mixed_windows_the_architecture_does_not_declare(
    windowed_model: Path,
) -> None:
    """qwen3 builds one mask for all its layers (from the first one's cache): windows that
    differ between its layers, patched onto an instance, are not its own (gemma3's, declared
    by its class, are served: tests/engine/test_scheduler_fit.py)."""
    assert layer_windows(load_model(windowed_model).model) == [WINDOW, WINDOW]
    with pytest.raises(ValueError, match="one mask"):
        layer_windows(_mixed(load_model(windowed_model)).model)
    engine = EngineWorker(lambda: _mixed(load_model(windowed_model)), engine="slots")
    with pytest.raises(ConfigError, match="--engine slots needs plain KV caches or sliding"):
        await engine.start()


@pytest.mark.parametrize(
    ("settings", "mixed", "want"),
    [
        ({}, False, "slots"),
        ({"speculative": "ngram"}, False, "slots"),
        ({"kv_bits": 8}, False, "slots"),
        ({}, True, "batch"),
    ],
)
async def test_auto_takes_the_slots_where_they_fit_on_a_cpu(
    windowed_model: Path, settings: dict[str, Any], mixed: bool, want: str
) -> None:
    """`--engine auto` (the server's default): the fixed slots on a CPU for a model they hold
    (with speculation, and with --kv-bits: here ignored, the window's caches stay plain),
    mlx-lm's batch for caches the slots refuse; it decodes."""

    def load() -> LoadedModel:
        loaded = load_model(windowed_model)
        return _mixed(loaded) if mixed else loaded

    engine = EngineWorker(load, engine="auto", **settings)
    loaded = await engine.start()
    try:
        # NOTE: on a GPU auto keeps mlx-lm's batch until the slots are measured there.
        assert engine.engine == (want if device_kind() == "cpu" else "batch")
        sampling = SamplingParams(max_tokens=4, temperature=0.0)
        out = await collect(engine.submit(loaded.tokenizer.encode("hello there"), sampling))
        assert len(out) == 4
    finally:
        engine.stop()


def test_a_windowed_sequence_moves_down_with_its_window(windowed_model: Path) -> None:
    """A sequence past its window moves from a high slot to a low one with the positions it
    still attends (the window's), and decodes on as mlx-lm's rotating caches do."""
    model = load_model(windowed_model).model
    prompts = [_prompt(n, i) for i, n in enumerate((5, 9, 7, 12, 6, 8))]
    lengths = [20, 40, 20, 20, 20, 40]
    generator = _slots(model, slots=8)
    uids = admit(generator, prompts, max_tokens=lengths)
    out = _run(generator, uids)
    for uid, prompt, n in zip(uids, prompts, lengths, strict=True):
        assert tuple(out[uid]) == _reference(windowed_model, prompt, window=WINDOW, tokens=n)
    assert generator.moved_sequences == 1  # slot 5's, 28 positions in: past the window
