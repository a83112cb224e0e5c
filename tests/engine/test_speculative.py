"""Speculative (n-gram) decoding leaves greedy output token-identical, in and out of a batch."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest

from service.engine.model import load_model
from service.engine.requests import EngineStats, SamplingParams
from service.engine.speculative import NgramDrafter
from service.engine.worker import EngineWorker

FILE = "".join(f"def handler_{i}(request):\n    return respond(request, {i})\n" for i in range(12))
PROMPTS = (
    f"Here is a file:\n{FILE}\nCopy it exactly:\n{FILE[:200]}",  # copies a long span
    "Reply with: hello",
    "the cat sat on the mat and the cat sat on the",
)


def _ban(token: int) -> Any:
    def processor(tokens: mx.array, logits: mx.array) -> mx.array:
        return logits.at[:, token].add(-1e9)

    return processor


async def _generate(
    path: Path, speculative: str, requests: list[tuple[str, SamplingParams, list[Any]]]
) -> tuple[list[tuple[int, ...]], EngineStats]:
    worker = EngineWorker(
        lambda: load_model(path),
        speculative=speculative,
        num_draft_tokens=5,
        prompt_cache_max_entries=0,
    )
    loaded = await worker.start()
    try:
        streams = [
            worker.submit(loaded.tokenizer.encode(text), sampling, processors)
            for text, sampling, processors in requests
        ]

        async def collect(stream: Any) -> tuple[int, ...]:
            ids: tuple[int, ...] = ()
            async for chunks in stream.batches():
                for chunk in chunks:
                    assert chunk.finish_reason in (None, "stop", "length"), chunk.error
                    ids += chunk.token_ids
            return ids

        return list(await asyncio.gather(*(collect(s) for s in streams))), worker.stats
    finally:
        worker.stop()


def _requests(tokens: int) -> list[tuple[str, SamplingParams, list[Any]]]:
    greedy = SamplingParams(max_tokens=tokens, temperature=0.0)
    return [(text, greedy, []) for text in PROMPTS]


@pytest.mark.parametrize("which", ["bundled", "random"])
async def test_greedy_output_is_identical_with_ngram_speculation(
    which: str, model_path: Path, random_model: Path
) -> None:
    path = model_path if which == "bundled" else random_model
    requests = _requests(48)
    # A constrained sequence in the same batch decodes normally inside verify steps.
    requests.append((PROMPTS[0], SamplingParams(max_tokens=48, temperature=0.0), [_ban(13)]))
    plain, _ = await _generate(path, "off", requests)
    fast, stats = await _generate(path, "ngram", requests)
    assert fast == plain
    assert stats.verify_steps > 0 and stats.accepted_tokens > 0
    # Alone, the copying prompt gives the same tokens as in the batch.
    (single,), _ = await _generate(path, "ngram", requests[:1])
    assert single == plain[0]


def test_drafter_continues_the_latest_earlier_occurrence() -> None:
    drafter = NgramDrafter()
    drafter.sync([1, 2, 3, 4, 9, 1, 2, 3, 5, 6, 7], 1)
    assert drafter.draft(3) == []  # "7 1" never occurred before
    drafter.sync([1, 2, 3, 4, 9, 1, 2, 3, 5, 6, 7, 1], 2)
    assert drafter.draft(3) == [3, 5, 6]  # the latest "1 2" continued with 3 5 6
    assert drafter.draft(0) == []
