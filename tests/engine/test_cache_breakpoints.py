"""A client's cache breakpoints (Anthropic `cache_control`, OpenAI `prompt_cache_breakpoint`)
become checkpoints: on a model whose cache cannot be trimmed back (a sliding window that has
rotated), a prompt's prefill leaves a prompt-cache entry at each, on every path (alone,
batched, slots, and a prefill handed from the first to the second)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.engine.test_sliding_window import LONG, PATHS, TOKENS, WINDOW, _reference, windowed_model
from tests.support.engine import collect

__all__ = ["windowed_model"]  # the fixture, shared with test_sliding_window

SAMPLING = SamplingParams(max_tokens=TOKENS, temperature=0.0)


async def _served(
    engine: EngineWorker, prompt: list[int], checkpoints: tuple[int, ...]
) -> tuple[tuple[int, ...], int, int]:
    """One greedy generation: its ids, the prompt tokens the prompt cache served and those the
    request wrote to it (the last chunk's `cache_written`)."""
    ids: tuple[int, ...] = ()
    cached, written = -1, 0
    async for chunks in engine.submit(prompt, SAMPLING, (), checkpoints).batches():
        for chunk in chunks:
            assert chunk.finish_reason in (None, "stop", "length"), chunk.error
            cached = chunk.cached_tokens if cached < 0 else cached
            ids += chunk.token_ids
            written = chunk.cache_written if chunk.finish_reason else written
    return ids, cached, written


def _conversation(path: Path) -> tuple[list[int], list[int], list[int], list[int]]:
    """A system turn, tool definitions and a first user message (each past the window), and
    what the first request adds after them."""
    encode = load_model(path).tokenizer.encode
    system = encode(LONG)
    tools = encode(" The tools: a lantern to light the way, a net to catch the fish, a map.")
    user = encode(" Tell me of the storms, of the ships and of the lights on the water.")
    assert min(len(system), len(tools), len(user)) > WINDOW
    return system, tools, user, encode(" And of the fisherman himself?")


async def _run(
    path: Path, prompts: list[list[int]], checkpoints: tuple[int, ...], **worker: Any
) -> tuple[list[tuple[tuple[int, ...], int, int]], Any]:
    engine = EngineWorker(lambda: load_model(path), **worker)
    await engine.start()
    try:
        results = [await _served(engine, prompt, checkpoints) for prompt in prompts]
    finally:
        engine.stop()
    return results, engine.stats


@pytest.mark.parametrize(("engine", "solo"), PATHS)
async def test_a_prompt_leaves_an_entry_at_each_breakpoint(
    windowed_model: Path, engine: str, solo: bool
) -> None:
    """Breakpoints after the system turn, the tools and the first user message: the first
    prompt's prefill leaves an entry at each (and but for its last token); a later prompt
    parting right after the tools reads exactly those, one parting after the user message
    exactly that, and each decodes as a cold prompt would. With the system turn's end alone
    (what the engine took before breakpoints), both read only the system turn."""
    system, tools, user, rest = _conversation(windowed_model)
    marks = (len(system), len(system) + len(tools), len(system) + len(tools) + len(user))
    first = [*system, *tools, *user, *rest]
    after_tools = [*first[: marks[1]], *rest]
    after_user = [*first[: marks[2]], *load_model(windowed_model).tokenizer.encode(" Why?")]
    prompts = [first, after_tools, after_user]
    worker = {"engine": engine, "solo": solo, "prefill_step_size": 7}

    results, stats = await _run(windowed_model, prompts, marks, **worker)
    assert [cached for _, cached, _ in results] == [0, marks[1], marks[2]]
    # Each request wrote its prompt past what it read (its entries hold it whole).
    assert [written for _, _, written in results] == [
        len(first),
        len(after_tools) - marks[1],
        len(after_user) - marks[2],
    ]
    # The first prompt: three breakpoints and its ends (but its last token, and whole); the
    # others their ends.
    assert stats.prompt_checkpoints == 5 + 2 + 2
    assert results[1][0] == _reference(windowed_model, after_tools, window=WINDOW)
    assert results[2][0] == _reference(windowed_model, after_user, window=WINDOW)

    system_only, _ = await _run(windowed_model, prompts, marks[:1], **worker)
    assert [cached for _, cached, _ in system_only] == [0, marks[0], marks[0]]


@pytest.mark.parametrize("engine", ["batch", "slots"])
async def test_a_prefill_handed_to_the_batch_still_leaves_its_breakpoint_entries(
    windowed_model: Path, engine: str
) -> None:
    """A lone prompt starts on the solo path, prefilling 4 tokens a step; a second request
    arrives before it reaches its breakpoints, so the batch goes on with it and takes the
    entries at each: later prompts parting after the tools, or after the user message, are
    served from there."""
    system, tools, user, rest = _conversation(windowed_model)
    marks = (len(system) + len(tools), len(system) + len(tools) + len(user))
    first = [*system, *tools, *user, *rest]
    worker = EngineWorker(lambda: load_model(windowed_model), engine=engine, prefill_step_size=4)
    tokenizer = (await worker.start()).tokenizer
    try:
        one = worker.submit(first, SAMPLING, (), marks)
        other = worker.submit(tokenizer.encode("hello there"), SAMPLING)
        await asyncio.gather(collect(one), collect(other))
        assert worker.stats.handovers == 1
        _, after_tools, _ = await _served(worker, [*first[: marks[0]], *rest], marks)
        why = tokenizer.encode(" Why?")
        _, after_user, _ = await _served(worker, [*first[: marks[1]], *why], marks)
    finally:
        worker.stop()
    assert (after_tools, after_user) == marks


async def test_without_a_prompt_cache_nothing_is_written(windowed_model: Path) -> None:
    """No prompt cache (`--prompt-cache-max-entries 0`): no entry, nothing read or written."""
    system, tools, user, rest = _conversation(windowed_model)
    first = [*system, *tools, *user, *rest]
    results, stats = await _run(
        windowed_model, [first, first], (len(system),), prompt_cache_max_entries=0
    )
    assert [(cached, written) for _, cached, written in results] == [(0, 0), (0, 0)]
    assert stats.prompt_checkpoints == 0
