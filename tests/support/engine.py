"""Drives an EngineWorker directly (no gRPC/HTTP): submit token prompts, collect token ids."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlx_responses.service.engine.model import LoadedModel, load_model
from mlx_responses.service.engine.requests import EngineStats, SamplingParams
from mlx_responses.service.engine.scheduler import Admission
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.hold import held_until

Request = tuple[str, SamplingParams, list[Any]]


async def collect(stream: Any, sizes: list[int] | None = None) -> tuple[int, ...]:
    """The token ids of one generation (each chunk's count into `sizes`); fails on errors."""
    ids: tuple[int, ...] = ()
    async for chunks in stream.batches():
        for chunk in chunks:
            assert chunk.finish_reason in (None, "stop", "length"), chunk.error
            assert chunk.tokens == len(chunk.token_ids)
            ids += chunk.token_ids
            if sizes is not None:
                sizes.append(chunk.tokens)
    return ids


async def generate(
    path: Path,
    requests: list[Request],
    turns: int = 1,
    *,
    loader: Callable[[Path], LoadedModel] = load_model,
    **worker: Any,
) -> tuple[list[tuple[int, ...]], EngineStats]:
    """Runs `requests` concurrently on a fresh worker, `turns` times; the last turn's ids
    (`loader`: how the worker loads `path`; a VLM's is `load_vision_model`). Each turn's
    requests are admitted in one pass (held until all have arrived), so the batch they form,
    and with it each row's arithmetic, never depends on when the thread woke."""
    engine = EngineWorker(lambda: loader(path), **worker)
    loaded = await engine.start()
    try:
        outputs: list[tuple[int, ...]] = []
        for _ in range(turns):
            with held_until(engine, len(requests)):
                streams = [
                    engine.submit(loaded.tokenizer.encode(text), sampling, processors)
                    for text, sampling, processors in requests
                ]
            outputs = list(await asyncio.gather(*(collect(s) for s in streams)))
        return outputs, engine.stats
    finally:
        engine.stop()


def greedy(texts: tuple[str, ...] | list[str], tokens: int) -> list[Request]:
    """Greedy, unconstrained requests of `tokens` tokens."""
    return [(text, SamplingParams(max_tokens=tokens, temperature=0.0), []) for text in texts]


_UIDS = itertools.count()


def admit(
    generator: Any,
    prompts: list[list[int]],
    *,
    max_tokens: list[int],
    caches: list[Any] | None = None,
    all_tokens: list[list[int]] | None = None,
    samplers: list[Any] | None = None,
    logits_processors: list[list[Any]] | None = None,
) -> list[int]:
    """Prompts into a scheduler (`scheduler.Scheduler.admit`, fresh uids), or into mlx-lm's
    BatchGenerator (`insert`) where a test measures against it: their uids."""
    if not hasattr(generator, "admit"):
        uids: list[int] = generator.insert(
            prompts,
            max_tokens=max_tokens,
            caches=caches,
            all_tokens=all_tokens,
            samplers=samplers,
            logits_processors=logits_processors,
        )
        return uids
    uids = []
    for i, prompt in enumerate(prompts):
        cache = caches[i] if caches else None
        admission = Admission(
            next(_UIDS),
            [list(prompt)],
            max_tokens[i],
            (samplers[i] if samplers else None) or generator.sampler,
            list(logits_processors[i]) if logits_processors else [],
            cache,
            list(all_tokens[i]) if all_tokens and cache is not None else [],
        )
        generator.admit(admission)
        uids.append(admission.uid)
    return uids


def step_tokens(generator: Any) -> list[Any]:
    """One step's generated tokens, of a scheduler or of mlx-lm's BatchGenerator."""
    if hasattr(generator, "admit"):
        return list(generator.step().tokens)
    return list(generator.next()[1])
