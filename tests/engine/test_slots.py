"""The fixed-slot engine (`engine="slots"`) decodes what mlx-lm's BatchGenerator decodes."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mlx_responses.service.engine.batch.mlx_lm_compat import BatchGenerator
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.slots import SlotScheduler
from mlx_responses.service.engine.slots.store import PrefillPlan
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import admit, collect, generate, greedy, step_tokens

PROMPTS = (
    "Reply with: hello",
    "the cat sat on the mat and the cat sat on the",
    "Here is a list: apples, pears, plums. Repeat the list twice:",
)


def _ban(token: int) -> Any:
    def processor(tokens: mx.array, logits: mx.array) -> mx.array:
        return logits.at[:, token].add(-1e9)

    return processor


@pytest.mark.parametrize("which", ["shipped", "bundled", "random"])
async def test_greedy_output_matches_the_batch_generator(
    which: str, model_path: Path, short_context_model: Path, random_model: Path
) -> None:
    """`shipped`: the bundled model as users get it, a 2,048-token window on every layer;
    `bundled`: its weights without the window."""
    path = {"shipped": model_path, "bundled": short_context_model, "random": random_model}[which]
    requests = greedy(PROMPTS, 40)
    requests.append((PROMPTS[1], SamplingParams(max_tokens=40, temperature=0.0), [_ban(13)]))
    off = {"prompt_cache_max_entries": 0}
    batch, _ = await generate(path, requests, **off)
    slots, stats = await generate(path, requests, engine="slots", **off)
    assert slots == batch
    assert stats.max_batch_seen >= 2
    (alone,), _ = await generate(path, requests[:1], engine="slots", **off)
    assert alone == batch[0]


async def test_staggered_arrivals_and_a_reused_prompt_cache(random_model: Path) -> None:
    """Sequences join and leave a running batch, and a second turn starts from the cache."""
    want, _ = await generate(random_model, greedy(PROMPTS, 24), prompt_cache_max_entries=0)
    engine = EngineWorker(lambda: load_model(random_model), engine="slots", max_batch_size=2)
    loaded = await engine.start()
    try:
        outputs: list[tuple[int, ...]] = []
        for _ in range(2):  # the second round hits the prompt cache
            streams = []
            for text in PROMPTS:
                ids = loaded.tokenizer.encode(text)
                streams.append(engine.submit(ids, SamplingParams(max_tokens=24, temperature=0.0)))
                await asyncio.sleep(0.01)  # each joins a batch already decoding
            outputs = list(await asyncio.gather(*(collect(s) for s in streams)))
            assert outputs == want
    finally:
        engine.stop()
    assert engine.stats.prompt_cache_hits >= len(PROMPTS)


async def test_a_cancelled_sequence_frees_its_slot_for_the_next(random_model: Path) -> None:
    want, _ = await generate(random_model, greedy(PROMPTS, 32), prompt_cache_max_entries=0)
    engine = EngineWorker(
        lambda: load_model(random_model),
        engine="slots",
        max_batch_size=2,
        prompt_cache_max_entries=0,
    )
    loaded = await engine.start()
    try:
        sampling = SamplingParams(max_tokens=32, temperature=0.0)
        doomed = engine.submit(loaded.tokenizer.encode("cancel me soon"), sampling)
        first = engine.submit(loaded.tokenizer.encode(PROMPTS[0]), sampling)
        waiting = [engine.submit(loaded.tokenizer.encode(t), sampling) for t in PROMPTS[1:]]
        async for _ in doomed.batches():
            doomed.cancel()  # after its first token: its slot goes to a waiting prompt
        outputs = await asyncio.gather(*(collect(s) for s in [first, *waiting]))
        # Sampled and with logprobs, a sequence also runs in a slot.
        sampled = engine.submit(
            loaded.tokenizer.encode(PROMPTS[0]),
            SamplingParams(max_tokens=8, temperature=1.0, logprobs=2),
        )
        chunks = [c async for batch in sampled.batches() for c in batch]
    finally:
        engine.stop()
    assert list(outputs) == want
    assert engine.stats.cancelled == 1
    logprobs = [lp for c in chunks for lp in c.logprobs]
    assert sum(c.tokens for c in chunks) == 8 and len(logprobs) == 8
    assert all(len(lp.top) == 2 and lp.logprob <= 0 for lp in logprobs)


# --- prefill: one forward per step for every waiting prompt --------------------------------


class _Counted:
    """The model, recording each forward's prefill plan (None for a decode step)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.layers = model.layers
        self.plans: list[Any] = []

    def __call__(self, inputs: mx.array, cache: list[Any]) -> mx.array:
        plan = getattr(cache[0], "plan", None)
        self.plans.append(plan if isinstance(plan, PrefillPlan) else None)
        return self.model(inputs, cache=cache)

    @property
    def prefills(self) -> list[Any]:
        return [p for p in self.plans if p is not None]


def _argmax(logprobs: mx.array) -> mx.array:
    return mx.argmax(logprobs, axis=-1)


def _run(generator: Any, uids: list[int]) -> dict[int, list[int]]:
    """Steps until every uid finished; each one's tokens (and, for SlotScheduler, its cache)."""
    out: dict[int, list[int]] = {uid: [] for uid in uids}
    done: set[int] = set()
    while done != set(uids):
        responses = step_tokens(generator)
        for r in responses:
            out[r.uid].append(r.token)
            if r.finish_reason is not None:
                done.add(r.uid)
    return out


def _batch_generator(model: Any, prompts: list[list[int]], tokens: int) -> list[list[int]]:
    """mlx-lm's BatchGenerator's greedy tokens for `prompts`, all inserted at once."""
    generator = BatchGenerator(model, stop_tokens=[], sampler=_argmax, prefill_step_size=2048)
    uids = admit(generator, prompts, max_tokens=[tokens] * len(prompts))
    out = _run(generator, uids)
    generator.close()
    return [out[uid] for uid in uids]


def _slots(model: Any, *, step: int = 2048, batch: int = 8, slots: int = 4) -> SlotScheduler:
    return SlotScheduler(
        model,
        stop_tokens=[],
        completion_batch_size=slots,
        prefill_batch_size=batch,
        prefill_step_size=step,
        sampler=_argmax,
    )


def _prompt(length: int, seed: int) -> list[int]:
    return [(seed * 37 + 11 * j) % 900 + 3 for j in range(length)]


def test_prompts_of_different_lengths_prefill_in_one_forward(random_model: Path) -> None:
    model = load_model(random_model).model
    prompts = [_prompt(n, i) for i, n in enumerate((5, 23, 61))]
    want = _batch_generator(model, prompts, 16)
    counted = _Counted(model)
    generator = _slots(counted)
    uids = admit(generator, prompts, max_tokens=[16] * 3)
    out = _run(generator, uids)
    assert [out[uid] for uid in uids] == want
    (prefill,) = counted.prefills  # all three in one forward, right-padded to the longest
    assert prefill.slots == [0, 1, 2] and prefill.starts == [0, 0, 0]
    assert prefill.width == 60  # the last prompt token is fed by the first decode step
    # Each decode step is one forward over all rows: 16 tokens, and one step of lag.
    assert len(counted.plans) == 1 + 16 + 1


def test_a_cached_prompt_prefills_beside_a_fresh_one(random_model: Path) -> None:
    """A prompt-cache hit (its row starts at > 0) in the same forward as a new prompt."""
    model = load_model(random_model).model
    first, fresh = _prompt(30, 1), _prompt(9, 2)
    warm = _slots(model)
    admit(warm, [first], max_tokens=[4])
    entry: list[Any] = []
    while not entry:
        responses = step_tokens(warm)
        entry = [r for r in responses if r.finish_reason is not None]
    cache, cached = entry[0].prompt_cache, entry[0].all_tokens
    assert cache is not None and cached is not None and len(cached) == 34
    follow_up = [*cached, *_prompt(17, 3)]
    want = [_batch_generator(model, [p], 12)[0] for p in (follow_up, fresh)]

    counted = _Counted(model)
    generator = _slots(counted)
    uids = admit(
        generator,
        [follow_up[len(cached) :], fresh],
        max_tokens=[12, 12],
        caches=[cache, None],
        all_tokens=[cached, []],
    )
    out = _run(generator, uids)
    assert [out[uid] for uid in uids] == want
    (prefill,) = counted.prefills
    assert prefill.starts == [34, 0] and prefill.width == 16


def test_a_chunked_long_prompt_beside_a_short_one(random_model: Path) -> None:
    """A budget smaller than the prompt: the long one takes several forwards, the short one
    joins the decode after the first, and both decode what BatchGenerator decodes."""
    model = load_model(random_model).model
    prompts = [_prompt(100, 4), _prompt(7, 5)]
    want = [_batch_generator(model, [p], 20)[0] for p in prompts]
    counted = _Counted(model)
    generator = _slots(counted, step=16)
    uids = admit(generator, prompts, max_tokens=[20, 20])
    out = _run(generator, uids)
    assert [out[uid] for uid in uids] == want
    prefills = counted.prefills
    assert len(prefills) == 7  # 99 tokens in chunks of 16; the short one rode in the first
    assert prefills[0].slots == [0, 1] and prefills[0].width == 16
    assert all(p.slots == [0] and p.width <= 16 for p in prefills[1:])
    assert [p.starts[0] for p in prefills] == list(range(0, 99, 16))


def test_late_prompts_prefill_into_free_slots_between_running_ones(random_model: Path) -> None:
    """Slots 1 and 3 (not adjacent) are prefilled in one forward while 0 and 2 decode."""
    model = load_model(random_model).model
    first = [_prompt(12, 6), _prompt(8, 7), _prompt(15, 8)]
    late = [_prompt(19, 9), _prompt(4, 10)]
    lengths = [24, 2, 24, 10, 10]
    want = [_batch_generator(model, [p], n)[0] for p, n in zip(first + late, lengths, strict=True)]
    counted = _Counted(model)
    generator = _slots(counted)
    uids = admit(generator, first, max_tokens=lengths[:3])
    out: dict[int, list[int]] = {uid: [] for uid in uids}
    while len(out[uids[1]]) < 2:  # the second one leaves slot 1
        for r in step_tokens(generator):
            out[r.uid].append(r.token)
    uids += admit(generator, late, max_tokens=lengths[3:])
    out.update({uid: [] for uid in uids[3:]})
    while any(len(out[uid]) < n for uid, n in zip(uids, lengths, strict=True)):
        for r in step_tokens(generator):
            out[r.uid].append(r.token)
    assert [out[uid] for uid in uids] == want
    assert counted.prefills[-1].slots == [1, 3]


# --- memory: rows up to the highest slot in use, released when idle ------------------------


def _rows(generator: SlotScheduler) -> set[int]:
    """The stores' slot dimension (0: released)."""
    return {0 if s.keys is None else s.keys.shape[0] for s in generator._stores}


def _wide(model: Any) -> SlotScheduler:
    """16 slots, as `--max-batch-size 16`."""
    return SlotScheduler(
        model,
        stop_tokens=[],
        completion_batch_size=16,
        prefill_batch_size=8,
        prefill_step_size=2048,
        sampler=_argmax,
    )


def test_a_long_sequence_alone_holds_its_own_rows_and_idle_releases_them(
    random_model: Path,
) -> None:
    """One long sequence in slot 0 of 16: the stores hold its row, not 16 of its length;
    once it ends they are released, its prompt-cache entry still serves the next turn, and a
    new request decodes what BatchGenerator decodes."""
    model = load_model(random_model).model
    long, short = _prompt(700, 11), _prompt(9, 12)
    generator = _wide(model)
    admit(generator, [long], max_tokens=[6])
    held: list[int] = []
    finished: list[Any] = []
    while not finished:
        responses = step_tokens(generator)
        held.append(generator.nbytes)
        finished = [r for r in responses if r.finish_reason is not None]
        if not finished:
            assert _rows(generator) == {1}  # its own row, not max_batch_size
    store = generator._stores[0]
    assert store.keys is None and store.values is None
    assert _rows(generator) == {0} and generator.nbytes == 0
    # What 16 slots of the sequence's capacity (768 positions) would hold.
    layers = len(model.layers)
    entry, cached = finished[0].prompt_cache, finished[0].all_tokens
    assert entry is not None and cached is not None and len(cached) == 706
    per_position = entry[0].keys.nbytes // 706 * 2  # keys and values, one layer
    full = 16 * 768 * per_position * layers
    assert max(held) == 768 * per_position * layers == full // 16

    # The entry (a copy made before the stores went) starts the next turn; a fresh prompt
    # beside it; both decode BatchGenerator's tokens.
    follow_up = [*cached, *_prompt(13, 13)]
    want = [_batch_generator(model, [p], 10)[0] for p in (follow_up, short)]
    uids = admit(
        generator,
        [follow_up[len(cached) :], short],
        max_tokens=[10, 10],
        caches=[entry, None],
        all_tokens=[cached, []],
    )
    out = _run(generator, uids)
    assert [out[u] for u in uids] == want
    assert _rows(generator) == {0} and generator.nbytes == 0


def test_the_slot_dimension_grows_mid_decode_as_arrivals_take_higher_slots(
    random_model: Path,
) -> None:
    """Staggered arrivals push the highest slot in use from 0 to 2, then 9: the stores grow their
    rows (1, 4, then 16, the limit) while the first sequences decode, and every sequence
    decodes BatchGenerator's tokens."""
    model = load_model(random_model).model
    prompts = [_prompt(5 + 7 * i, 20 + i) for i in range(10)]
    want = [_batch_generator(model, [p], 24)[0] for p in prompts]
    generator = _wide(model)
    uids: list[int] = []
    out: dict[int, list[int]] = {}
    seen: list[int] = []
    for group in (prompts[:1], prompts[1:3], prompts[3:]):
        new = admit(generator, group, max_tokens=[24] * len(group))
        uids += new
        out.update({u: [] for u in new})
        for _ in range(3):  # a few steps before the next arrivals
            for r in step_tokens(generator):
                out[r.uid].append(r.token)
            seen += [*_rows(generator)]
    while any(len(out[u]) < 24 for u in uids):
        for r in step_tokens(generator):
            out[r.uid].append(r.token)
    assert [out[u] for u in uids] == want
    assert sorted(set(seen)) == [1, 4, 16]
    assert _rows(generator) == {0}


def _held_slots(generator: SlotScheduler) -> list[int]:
    return [i for i, seq in enumerate(generator.slots) if seq is not None]


def test_sequences_left_in_high_slots_move_down(random_model: Path) -> None:
    """Sequences of different lengths finish and leave holes; the two still decoding (slots 1
    and 5) would make every step compute six rows, so slot 5's moves down (its keys copied)
    and the steps run over two; every sequence decodes as mlx-lm's batch does."""
    model = load_model(random_model).model
    prompts = [_prompt(n, i) for i, n in enumerate((5, 9, 7, 12, 6, 8))]
    lengths = [3, 30, 3, 3, 3, 30]
    want = _batch_generator(model, prompts, 30)
    generator = _slots(model, slots=8)
    uids = admit(generator, prompts, max_tokens=lengths)
    out: dict[int, list[int]] = {uid: [] for uid in uids}
    spans: list[list[int]] = []
    while any(len(out[uid]) < n for uid, n in zip(uids, lengths, strict=True)):
        for r in step_tokens(generator):
            out[r.uid].append(r.token)
        spans.append(_held_slots(generator))
    assert [out[uid] for uid in uids] == [w[:n] for w, n in zip(want, lengths, strict=True)]
    assert [0, 1, 2, 3, 4, 5] in spans
    assert [0, 1] in spans and [1, 5] not in spans[spans.index([0, 1]) :]


def test_the_stores_give_back_what_finished_sequences_held(random_model: Path) -> None:
    """A burst of 8 with one long prompt: once the long one and six short ones finish, the one
    left (moved to slot 0) holds the stores to one row of its own length, a fraction of the
    burst's; it decodes on as mlx-lm's batch decodes it."""
    model = load_model(random_model).model
    prompts = [_prompt(700, 20), *(_prompt(9 + i, 21 + i) for i in range(7))]
    lengths = [2, 4, 4, 4, 4, 4, 4, 40]
    want = [_batch_generator(model, [p], n)[0] for p, n in zip(prompts, lengths, strict=True)]
    generator = _slots(model, slots=8)
    uids = admit(generator, prompts, max_tokens=lengths)
    out: dict[int, list[int]] = {uid: [] for uid in uids}
    shapes: list[tuple[int, ...]] = []
    held: list[int] = []
    while any(len(out[uid]) < n for uid, n in zip(uids, lengths, strict=True)):
        for r in step_tokens(generator):
            out[r.uid].append(r.token)
        keys = generator._stores[0].keys
        assert keys is None or isinstance(keys, mx.array)
        shapes.append(() if keys is None else tuple(keys.shape[:3]))
        held.append(generator.nbytes)
    assert [out[uid] for uid in uids] == want
    assert (8, shapes[0][1], 768) in shapes  # the burst: 8 rows, the long prompt's positions
    assert (1, shapes[0][1], 256) in shapes  # the last one alone: its row, its length
    assert min(b for b in held if b) * 20 < max(held)


def _unevaluated(array: mx.array) -> bool:
    """Whether `array`'s log-softmax is still to compute (its graph holds the LogSumExp)."""
    dot = io.StringIO()
    mx.export_to_dot(dot, array)
    return "LogSumExp" in dot.getvalue()


@pytest.mark.parametrize("alone", [False, True])
def test_greedy_log_probabilities_are_computed_only_where_read(
    random_model: Path, alone: bool
) -> None:
    """A greedy step (the slots', or a lone sequence's) evaluates its tokens, not their log
    probabilities (an exp per vocabulary id and row): those are computed when a request reads
    them, and are then the log-softmax, whose argmax is the token. A sampled row evaluates them
    (its sampler reads them)."""
    from mlx_responses.service.engine.mlx_lm_compat import (
        greedy_sampler,
        make_prompt_cache,
        make_sampler,
    )
    from mlx_responses.service.engine.solo import SoloSequence

    loaded = load_model(random_model)
    prompt = loaded.tokenizer.encode(PROMPTS[1])
    generator = SlotScheduler(
        loaded.model,
        stop_tokens=[],
        completion_batch_size=3,
        prefill_batch_size=3,
        prefill_step_size=512,
    )
    if alone:
        solo = SoloSequence(
            loaded.model,
            generator.stream,
            uid=0,
            prompt=prompt,
            cache=make_prompt_cache(loaded.model),
            cached=[],
            sampler=greedy_sampler,
            max_tokens=8,
            stop_tokens=(),
            prefill_step_size=512,
        )
        tokens = [token for _ in range(6) if (token := solo.step()) is not None]
    else:
        admit(generator, [prompt, prompt[:-2]], max_tokens=[8, 8], samplers=[greedy_sampler] * 2)
        tokens = [token for _ in range(4) for token in step_tokens(generator)]
    assert len(tokens) >= 4
    assert all(_unevaluated(token.logprobs) for token in tokens)
    for token in tokens:  # read: the log-softmax
        values = np.array(token.logprobs, dtype=np.float32).reshape(-1)
        assert abs(float(np.exp(values.astype(np.float64)).sum()) - 1) < 1e-3
        assert int(values.argmax()) == token.token
    (uid,) = admit(generator, [prompt], max_tokens=[4], samplers=[make_sampler(temp=0.7)])
    sampled = [token for _ in range(4) for token in step_tokens(generator) if token.uid == uid]
    assert sampled and not any(_unevaluated(token.logprobs) for token in sampled)
