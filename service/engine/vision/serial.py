"""A vision model of a family the slots do not batch, behind the scheduler protocol: its
sequences decode one at a time, each as mlx-vlm's own `generate_step` decodes it.

The slots drive a language side they know (`side.BATCHED`: per-row embeddings, M-RoPE
positions, Qwen3-VL's deepstack features, plain caches); other families' language models take
more (sliding windows, a 4D attention mask, cross-attention states) that only mlx-vlm's own
step passes. This scheduler runs that step: the first sequence admitted prefills (the vision tower
inside mlx-vlm's `get_input_embeddings`) and decodes a token per `step`, the others wait
their turn in arrival order. Greedy output is mlx-vlm's `generate` output for the same prompt.
It keeps no prompt-cache entry (its sequences are always prefilled whole).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.cache_bytes import cache_nbytes
from mlx_responses.service.engine.scheduler import (
    Admission,
    Alone,
    SpeculationCounts,
    StepResult,
    Token,
)
from mlx_responses.service.engine.vision.language import decodable_only


@dataclass
class _Running:
    admission: Admission
    steps: Iterator[tuple[Any, mx.array]]  # mlx-vlm's: (token id, logprobs)
    cache: list[Any]  # the KV its steps fill
    generated: int = 0


class VisionSerialScheduler:
    """One sequence at a time through mlx-vlm's `generate_step`; the rest queued."""

    rewinds_any_window = False
    speculates = False
    takes_embeddings = False

    def __init__(
        self,
        model: Any,
        *,
        n_tokens: int,
        stop_tokens: Collection[int],
        prefill_step_size: int,
    ) -> None:
        """`model`: the mlx-vlm model; `n_tokens`: the tokenizer's ids (the head may be
        wider: no id past them is sampled)."""
        self.model = model
        self.stop_tokens = frozenset(stop_tokens)
        self.prefill_step_size = prefill_step_size
        self.prompt_ends = False
        self._decodable = decodable_only(n_tokens)
        self._queue: deque[Admission] = deque()
        self._running: _Running | None = None

    @property
    def stream(self) -> Any:
        from mlx_vlm.generate.common import generation_stream

        return generation_stream

    def admit(self, admission: Admission) -> None:
        if not admission.cached and not admission.prompt:
            raise ValueError("an empty prompt")
        self._queue.append(admission)

    def step(self) -> StepResult:
        result = StepResult()
        if self._running is None:
            if not self._queue:
                return result
            from mlx_vlm.models.cache import make_prompt_cache  # the optional extra

            admission = self._queue.popleft()
            cache = make_prompt_cache(self.model.language_model)
            self._running = _Running(admission, self._start(admission, cache), cache)
            result.prefilled = len(admission.prompt)
        running = self._running
        token, logprobs = next(running.steps)
        token = int(token)
        running.generated += 1
        finish = None
        if token in self.stop_tokens:
            finish = "stop"
        elif running.generated >= running.admission.max_tokens:
            finish = "length"
        result.tokens.append(Token(running.admission.uid, token, logprobs, finish))
        if finish is not None:
            self._end()
        return result

    def _start(self, admission: Admission, cache: list[Any]) -> Iterator[tuple[Any, mx.array]]:
        """mlx-vlm's step over the whole prompt (a cache handed in is not read: this scheduler
        never hands one out), its images' arrays as mlx-vlm's `generate` takes them."""
        from mlx_vlm.generate.ar import generate_step

        prompt = [*admission.cached, *admission.prompt]
        images = admission.images
        pixels = None
        kwargs: dict[str, Any] = {}
        if images is not None and images.pixel_values is not None:
            pixels = mx.array(images.pixel_values)
            kwargs = {key: mx.array(value) for key, value in images.extra.items()}
            if images.image_grid_thw is not None:
                kwargs["image_grid_thw"] = mx.array(images.image_grid_thw)
        # The attention mask mlx-vlm's processor gives one unpadded prompt (Gemma 3 needs it).
        return generate_step(
            mx.array([prompt]),
            self.model,
            pixels,
            mx.ones((1, len(prompt)), mx.int32),
            max_tokens=admission.max_tokens,
            prompt_cache=cache,
            sampler=admission.sampler,
            logits_processors=[*admission.logits_processors, self._decodable],
            prefill_step_size=self.prefill_step_size,
            **kwargs,
        )

    def _end(self) -> None:
        if self._running is not None:
            steps = self._running.steps
            self._running = None
            if hasattr(steps, "close"):
                steps.close()

    def drop(self, uids: Sequence[int]) -> None:
        gone = set(uids)
        self._queue = deque(a for a in self._queue if a.uid not in gone)
        if self._running is not None and self._running.admission.uid in gone:
            self._end()

    def extract(self, uids: Sequence[int]) -> dict[int, tuple[list[Any], list[int]]]:
        return {}

    def take_alone(self) -> Alone | None:
        return None

    @property
    def nbytes(self) -> int:
        if self._running is None:
            return 0
        return cache_nbytes(self._running.cache)

    @property
    def waiting(self) -> int:
        return len(self._queue)

    @property
    def decoding(self) -> int:
        return 0 if self._running is None else 1

    @property
    def speculation(self) -> SpeculationCounts | None:
        return None

    def close(self) -> None:
        self._queue.clear()
        self._end()
