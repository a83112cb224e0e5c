"""A cancelled generation leaves its batch slot before the engine's next decode step."""

from __future__ import annotations

from mlx_responses.service.engine.requests import SamplingParams

from tests.support.stack import Stack
from tests.support.waits import until_async


def test_cancel_frees_the_slot_within_one_decode_step(random_stack: Stack) -> None:
    assert random_stack.core is not None
    worker = random_stack.core.models.default.runtime.worker
    stats = worker.stats

    async def run() -> tuple[int, int, str]:
        stream = worker.submit([1, 2, 3, 4], SamplingParams(max_tokens=100_000, temperature=0))
        seen = 0
        async for batch in stream.batches():
            seen += sum(c.tokens for c in batch)
            if seen >= 8:
                break
        # What a disconnect ends in: the RPC's cancellation cancels the engine stream.
        steps_at_cancel = stats.decode_steps
        stream.cancel()
        await until_async(lambda: not stats.active, "the cancelled stream's slot", every=0.001)
        return steps_at_cancel, stats.decode_steps, "freed"

    before, after, slot = random_stack.run(run())
    assert slot == "freed"
    # The step running when the cancel arrived may finish; no further step decodes it.
    assert after - before <= 1, (before, after)
