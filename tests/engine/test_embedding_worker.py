"""The embedding engine thread: requests queued while a forward runs share the next forward,
and each gets its own rows' vectors back; a stopped worker refuses."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.engine.embedding import worker as worker_module
from mlx_responses.service.engine.embedding.load import load_embedding_model
from mlx_responses.service.engine.embedding.worker import EmbeddingWorker
from mlx_responses.service.engine.requests import EngineStoppedError

TINY_EMBED = BUNDLED_MODEL.parent / "tiny-embed"


async def test_requests_queued_during_a_forward_share_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = EmbeddingWorker(lambda: load_embedding_model(TINY_EMBED, "tiny-embed"))
    loaded = await worker.start()
    tokenizer = loaded.tokenizer._tokenizer
    rows = [list(tokenizer(t)["input_ids"]) for t in ("one", "two words", "and three words")]
    forward = worker_module.forward
    entered, gate = threading.Event(), threading.Event()
    batches: list[int] = []

    def held(
        model: Any, batch: Sequence[Sequence[int]], pad_id: int, pooling: str | None
    ) -> np.ndarray:
        batches.append(len(batch))
        entered.set()
        gate.wait(30)  # the first forward runs until the others are queued
        return forward(model, batch, pad_id, pooling)

    monkeypatch.setattr(worker_module, "forward", held)
    try:
        first = worker.submit([rows[0]])
        await asyncio.to_thread(entered.wait, 30)
        second, third = worker.submit([rows[1]]), worker.submit([rows[2], rows[0]])
        gate.set()
        a, b, c = await asyncio.gather(first, second, third)
        assert batches == [1, 3]  # the two queued requests: one forward of their 3 rows
        assert worker.forwards == 2
        assert [v.shape for v in (a, b, c)] == [(1, 64), (1, 64), (2, 64)]
        # Each got its own rows back, as each alone would have (padding changes nothing).
        monkeypatch.setattr(worker_module, "forward", forward)
        alone = [await worker.submit([r]) for r in rows]
        np.testing.assert_allclose(b[0], alone[1][0], atol=2e-5)
        np.testing.assert_allclose(c[0], alone[2][0], atol=2e-5)
        np.testing.assert_allclose(c[1], a[0], atol=2e-5)
    finally:
        gate.set()
        await worker.unload()
    with pytest.raises(EngineStoppedError):
        worker.submit([rows[0]])
