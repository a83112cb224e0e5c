"""The engine thread of a vision-language model: mlx-vlm generation, one request at a time.

Like EngineWorker (worker.py) it owns its model on one dedicated thread and hands text back to
the asyncio loop with `call_soon_threadsafe`; unlike it, it does not batch: requests run in turn
through mlx-vlm's own `stream_generate`, with no prompt (KV) cache. Image encodings (the vision
tower's output) are cached by the images' content hashes, so a resent image skips the tower.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.mlx_lm_compat import make_sampler
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.model_thread import ModelThread, Stop
from mlx_responses.service.engine.requests import (
    Chunk,
    EngineStats,
    LogitsProcessor,
    SamplingParams,
    TokenLogprob,
)
from mlx_responses.service.engine.worker import GenerationStream


def decodable_only(n_tokens: int) -> LogitsProcessor:
    """Never sample an id past the tokenizer's: a model's head is often wider (padded), and
    a padding id has no text (the detokenizer would fail on it)."""

    def mask(tokens: mx.array, logits: mx.array) -> mx.array:
        if logits.shape[-1] <= n_tokens:
            return logits
        allowed = mx.arange(logits.shape[-1]) < n_tokens
        return mx.where(allowed, logits, mx.array(-mx.inf, logits.dtype))

    return mask


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VisionInputs:
    """A processed multimodal prompt: the processor's arrays and each image's content hash."""

    pixel_values: np.ndarray | None
    image_grid_thw: np.ndarray | None  # Qwen-VL style: one (t, h, w) row per image
    image_keys: tuple[str, ...]
    extra: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class VisionCacheStats:
    """Image-encoding cache counters (read by /metrics)."""

    hits: int = 0
    misses: int = 0
    encode_seconds: float = 0.0  # spent in the vision tower (misses)
    entries: int = 0


@dataclass
class _Submit:
    stream: GenerationStream
    prompt: list[int]
    inputs: VisionInputs | None
    sampling: SamplingParams
    logits_processors: list[LogitsProcessor]


@dataclass
class VisionWorker(ModelThread[tuple[LoadedModel, Any]]):
    """Owns a vision-language model (loaded by `load` on its own thread) and runs its requests."""

    load: Callable[[], tuple[LoadedModel, Any]]  # the model and its mlx-vlm processor
    name: str = "mlx-vision"
    max_queued_requests: int = 64
    encoding_cache_entries: int = 64
    stats: EngineStats = field(default_factory=EngineStats)
    cache_stats: VisionCacheStats = field(default_factory=VisionCacheStats)

    def __post_init__(self) -> None:
        self._init_thread()
        self._cancelled: set[int] = set()
        self.processor: Any = None
        # Owned by the thread: image content hash -> the vision tower's output for that image.
        self._encodings: OrderedDict[str, mx.array] = OrderedDict()

    # --- called from asyncio -------------------------------------------------------------
    @property
    def takes_checkpoints(self) -> bool:
        """Its prompts leave no prompt-cache entries before their end (as EngineWorker asks)."""
        return False

    @property
    def _capacity(self) -> int:
        return 1 + self.max_queued_requests  # one running, the rest queued

    def _took(self, result: tuple[LoadedModel, Any]) -> LoadedModel:
        loaded, self.processor = result
        return loaded

    def _released(self) -> None:
        self.processor = None

    def submit(
        self,
        prompt: Sequence[int],
        sampling: SamplingParams,
        logits_processors: Sequence[LogitsProcessor] = (),
        inputs: VisionInputs | None = None,
    ) -> GenerationStream:
        self._admit()
        # GenerationStream only calls back `cancel(stream)`, which this worker has.
        stream = GenerationStream(cast(Any, self), asyncio.get_running_loop())
        self._commands.put(_Submit(stream, list(prompt), inputs, sampling, list(logits_processors)))
        return stream

    def cancel(self, stream: GenerationStream) -> None:
        with self._lock:
            self._cancelled.add(id(stream))

    # --- the MLX thread --------------------------------------------------------------------
    def _emit(self, stream: GenerationStream, chunk: Chunk) -> None:
        if chunk.finish_reason is not None:
            with self._lock:
                self._in_flight -= 1
                self._cancelled.discard(id(stream))
        stream._loop.call_soon_threadsafe(stream.deliver, chunk)

    def _run(self, ready: concurrent.futures.Future[tuple[LoadedModel, Any]]) -> None:
        try:
            ready.set_result(self.load())
        except BaseException as exc:
            ready.set_exception(exc)
            return
        while True:
            command = self._commands.get()
            if isinstance(command, Stop):
                self.alive = False
                self._drain()
                self._encodings.clear()
                self._stopped.set()
                return
            try:
                self._generate(command)
            except Exception as exc:
                log.exception("vision generation failed")
                self.stats.active = self.stats.running = self.stats.batch_size = 0
                self._emit(command.stream, Chunk("", 0, "error", error=str(exc)))

    def _drain(self) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            if isinstance(command, _Submit):
                self._emit(command.stream, Chunk("", 0, "cancelled"))

    def _is_cancelled(self, stream: GenerationStream) -> bool:
        with self._lock:
            return id(stream) in self._cancelled

    def _generate(self, job: _Submit) -> None:
        from mlx_vlm import stream_generate

        stream = job.stream
        if self._is_cancelled(stream):
            self._emit(stream, Chunk("", 0, "cancelled"))
            return
        loaded = self.loaded
        model = loaded.model
        kwargs: dict[str, Any] = {}
        pixel_values = None
        if job.inputs is not None and job.inputs.pixel_values is not None:
            pixel_values = mx.array(job.inputs.pixel_values)
            for key, value in job.inputs.extra.items():
                kwargs[key] = mx.array(value)
            if job.inputs.image_grid_thw is not None:
                kwargs["image_grid_thw"] = mx.array(job.inputs.image_grid_thw)
                features = self._encode(model, job.inputs, pixel_values)
                if features is not None:
                    kwargs["cached_image_features"] = features
        s = job.sampling
        sampler = make_sampler(temp=s.temperature, top_p=s.top_p)
        detokenizer = loaded.tokenizer.detokenizer
        detokenizer.reset()
        self.stats.active = self.stats.running = self.stats.batch_size = 1
        generated = 0
        finish = "length"
        processors = [*(job.logits_processors or ()), decodable_only(len(loaded.tokenizer))]
        for result in stream_generate(
            model,
            self.processor,
            "",
            input_ids=mx.array([job.prompt]),
            pixel_values=pixel_values,
            max_tokens=s.max_tokens,
            sampler=sampler,
            logits_processors=processors,
            **kwargs,
        ):
            if self._is_cancelled(stream):
                finish = "cancelled"
                break
            token = result.token
            # mlx-vlm's last result repeats the last token with its finish reason.
            if result.finish_reason is not None or token is None:
                finish = result.finish_reason or finish
                break
            if token in loaded.tokenizer.eos_token_ids:
                finish = "stop"
                break
            generated += 1  # noqa: SIM113 (only tokens that are not the end count)
            detokenizer.add_token(int(token))
            text = detokenizer.last_segment
            self.stats.generated_tokens += 1
            logprobs = self._logprobs(int(token), result.logprobs, s.logprobs)
            if generated >= s.max_tokens:
                detokenizer.finalize()
                text += detokenizer.last_segment
                last = Chunk(text, 1, "length", logprobs=logprobs, token_ids=(int(token),))
                self._emit(stream, last)
                self.stats.completed += 1
                self.stats.active = self.stats.running = self.stats.batch_size = 0
                return
            self._emit(stream, Chunk(text, 1, logprobs=logprobs, token_ids=(int(token),)))
        detokenizer.finalize()
        if finish == "cancelled":
            self.stats.cancelled += 1
        else:
            self.stats.completed += 1
        self.stats.active = self.stats.running = self.stats.batch_size = 0
        self._emit(stream, Chunk(detokenizer.last_segment, 0, finish))

    def _logprobs(self, token: int, logprobs: Any, top: int) -> tuple[TokenLogprob, ...]:
        """The sampled token's log probability and the `top` most likely (as EngineWorker)."""
        if top < 0 or logprobs is None:
            return ()
        decode = self.loaded.tokenizer.decode
        values = np.array(logprobs, dtype=np.float32).reshape(-1)
        alternatives: tuple[tuple[str, float], ...] = ()
        if top > 0:
            ids = np.argpartition(-values, top - 1)[:top]
            ranked = ids[np.argsort(-values[ids])]
            alternatives = tuple((decode([int(i)]), float(values[i])) for i in ranked)
        return (TokenLogprob(decode([token]), float(values[token]), alternatives),)

    def _encode(self, model: Any, inputs: VisionInputs, pixel_values: mx.array) -> mx.array | None:
        """The vision tower's output for every image, cached per image by content hash.

        Qwen-VL layout only (a `vision_tower(pixels, grid_thw)` and one grid row per image);
        other architectures encode inside the model call, uncached.
        """
        tower = getattr(model, "vision_tower", None)
        grid = inputs.image_grid_thw
        if tower is None or grid is None or len(grid) != len(inputs.image_keys):
            return None
        dtype = tower.patch_embed.proj.weight.dtype
        parts: list[mx.array] = []
        offset = 0
        for key, row in zip(inputs.image_keys, grid, strict=True):
            patches = int(np.prod(row))
            cached = self._encodings.get(key)
            if cached is not None:
                self._encodings.move_to_end(key)
                self.cache_stats.hits += 1
                parts.append(cached)
            else:
                started = time.perf_counter()
                pixels = pixel_values[offset : offset + patches].astype(dtype)
                features = tower(pixels, mx.array(row[None, :]), output_hidden_states=False)
                mx.eval(features)
                self.cache_stats.encode_seconds += time.perf_counter() - started
                self.cache_stats.misses += 1
                self._encodings[key] = features
                while len(self._encodings) > self.encoding_cache_entries:
                    self._encodings.popitem(last=False)
                parts.append(features)
            offset += patches
        self.cache_stats.entries = len(self._encodings)
        return mx.concatenate(parts, axis=0)
