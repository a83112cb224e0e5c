"""The one thread that owns MLX: a continuous-batching scheduler over mlx-lm's BatchGenerator.

Requests cross into the thread through a queue; generated text crosses back to the asyncio loop
with `loop.call_soon_threadsafe`. Cancellation is honoured between decode steps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import itertools
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import mlx.core as mx
import numpy as np
from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.draft_model import DraftedModel, DraftModelError, check_draft
from mlx_responses.service.engine.grammar_batch import GrammarGenerationBatch
from mlx_responses.service.engine.mlx_lm_compat import (
    BatchGenerator,
    can_trim_prompt_cache,
    make_prompt_cache,
    trim_prompt_cache,
)
from mlx_responses.service.engine.model import LoadedModel, plain_caches
from mlx_responses.service.engine.model_thread import ModelThread, Stop
from mlx_responses.service.engine.observer import EngineObserver, ModelObserver
from mlx_responses.service.engine.outbox import Outbox
from mlx_responses.service.engine.prefill_batch import PiecewisePromptBatch
from mlx_responses.service.engine.prompt_disk import PromptDisk, open_disk
from mlx_responses.service.engine.prompt_trie import new_prompt_cache
from mlx_responses.service.engine.quantized_cache import kv_group_size, new_sequence_cache
from mlx_responses.service.engine.requests import (
    Chunk,
    EngineStats,
    LogitsProcessor,
    SamplingParams,
    TokenLogprob,
)
from mlx_responses.service.engine.seeded_sampler import seeded_sampler, shared_sampler
from mlx_responses.service.engine.slot_speculation import SlotSpeculation
from mlx_responses.service.engine.slots import SlotGenerator, slots_serve
from mlx_responses.service.engine.solo import Alone, SoloSequence
from mlx_responses.service.engine.speculative import SpeculativeGenerationBatch
from mlx_responses.service.flags import Prefill, prefill_for_device
from mlx_responses.service.ids import OWNER

log = logging.getLogger(__name__)


# The most checkpoints one prompt's prefill leaves entries at: the system turn's end and a
# client's four cache breakpoints (Anthropic takes at most four `cache_control` blocks).
MAX_CHECKPOINTS = 5


def _segments(prompt: list[int], splits: Sequence[int]) -> list[list[int]]:
    """A prompt as `insert_segments` takes it: cut at each of `splits` that lies inside it
    (checkpoints: the prefill leaves an entry at each), else whole."""
    cuts = sorted({s for s in splits if 0 < s < len(prompt) - 1})
    bounds = [0, *cuts, len(prompt)]
    return [prompt[a:b] for a, b in itertools.pairwise(bounds)]


@dataclass
class _Submit:
    stream: GenerationStream
    prompt: list[int]
    sampling: SamplingParams
    logits_processors: list[LogitsProcessor]
    checkpoints: tuple[int, ...] = ()  # prompt positions whose cache is worth an entry
    submitted_at: float = field(default_factory=time.perf_counter)
    scope: str = ""  # whose prompt-cache entries it may use and leaves (--isolate-keys)


@dataclass
class _Cancel:
    stream: GenerationStream


@dataclass
class _Active:
    stream: GenerationStream
    detokenizer: Any
    generated: int = 0
    cached_tokens: int = 0
    logprobs: int = -1
    submitted_at: float = 0.0
    last_token_at: float = 0.0
    scope: str = ""  # _Submit.scope
    prompt_tokens: int = 0
    # The longest prefix of the prompt that this request's entries hold (checkpoints, or the
    # finished turn's): what it wrote to the prompt cache beyond `cached_tokens`.
    written_to: int = 0


class GenerationStream:
    """The asyncio side of one request: an async iterator of coalesced chunks."""

    def __init__(self, worker: EngineWorker, loop: asyncio.AbstractEventLoop) -> None:
        self._worker = worker
        self._loop = loop
        self._queue: asyncio.Queue[Chunk] = asyncio.Queue()
        self.finished = False
        self.first_token_at: float | None = None

    def deliver(self, chunk: Chunk) -> None:
        """Called on the loop thread (through call_soon_threadsafe)."""
        if self.first_token_at is None and chunk.tokens:
            self.first_token_at = time.perf_counter()
        self._queue.put_nowait(chunk)

    def cancel(self) -> None:
        """Stops the generation (idempotent); a final 'cancelled' chunk follows."""
        if not self.finished:
            self._worker.cancel(self)

    async def batches(self) -> AsyncIterator[list[Chunk]]:
        """Yields every chunk that is ready, together, until the last one."""
        try:
            while not self.finished:
                ready = await self._queue.get()
                # What arrived since the last read leaves as one chunk (one event downstream).
                while not self._queue.empty():
                    ready = ready.merged(self._queue.get_nowait())
                if ready.finish_reason is not None:
                    self.finished = True
                yield [ready]
        finally:
            # A consumer that stops early (client gone, task cancelled) frees its slot.
            if not self.finished:
                self.finished = True
                self._worker.cancel(self)


def device_kind() -> str:
    """The kind of MLX's default device: "gpu" (Metal or CUDA) or "cpu"."""
    return "gpu" if mx.default_device().type == mx.gpu else "cpu"


def _waiting(generator: BatchGenerator) -> int:
    """Prompts the batch holds that are not decoding yet (being prefilled, or not started)."""
    return len(generator._prompt_batch) + len(generator._unprocessed_sequences)


def _take_alone(generator: BatchGenerator, active: dict[int, Any]) -> Alone | None:
    """mlx-lm's batch down to one unconstrained sequence with nobody waiting: that sequence,
    removed from the batch (its cache extracted, its sampled token not yet fed)."""
    batch = generator._generation_batch
    if (
        len(batch) != 1
        or _waiting(generator)
        or batch.logits_processors[0]
        or batch.uids[0] not in active
    ):
        return None
    uid = batch.uids[0]
    alone = Alone(
        uid,
        batch.extract_cache(0),
        list(batch.tokens[0]),
        (batch._next_tokens, batch._next_logprobs[0]),
        batch.samplers[0],
        batch.max_tokens[0] - batch._num_tokens[0],
    )
    generator.remove([uid])
    return alone


@dataclass
class EngineWorker(ModelThread[LoadedModel]):
    """Owns the model and a BatchGenerator on a dedicated thread.

    The model is loaded on that thread too: MLX state never touches another thread.
    """

    load: Callable[[], LoadedModel]
    name: str = "mlx-engine"  # of the thread
    max_batch_size: int = 16
    max_queued_requests: int = 64
    prefill_step_size: int = 512
    # Prompt tokens prefilled between two decode steps while sequences decode (all prompts),
    # and prompts prefilled together; None: the device's default (flags.prefill_for_device).
    max_prefill_tokens_per_step: int | None = None
    prefill_batch_size: int | None = None
    prompt_cache_max_entries: int = 32
    prompt_cache_max_bytes: int = 1 << 30
    # The prompt cache's disk tier (prompt_disk.py): its folder (None: none) and byte budget.
    prompt_cache_dir: Path | None = None
    prompt_cache_disk_bytes: int = 0
    # "off", "ngram" (prompt-lookup drafts) or "draft" (drafts of `load_draft`'s model), for
    # greedy sequences
    speculative: str = "off"
    num_draft_tokens: int = 4
    load_draft: Callable[[], LoadedModel] | None = None
    kv_bits: int | None = None  # 4 or 8: quantized KV for live and prompt-cached sequences
    # Seconds a stream's tokens may be held and merged into one chunk (its first token never
    # waits; 0: every step's tokens leave at once).
    stream_window: float = 0.0
    # Seconds an idle engine waits after a request for more (each arrival waits again, at most
    # 4x in all), so that a burst starts as one batch; 0: at once.
    batch_wait: float = 0.0
    # "batch": mlx-lm's BatchGenerator; "slots": ours, fixed KV slots;
    # "auto" (the server's default): slots where they fit, on a CPU
    engine: str = "batch"
    # A lone unconstrained sequence decodes as mlx-lm's generate_step does (plain KV cache), and
    # joins the batch when a second request arrives (service/engine/solo.py).
    solo: bool = True
    stats: EngineStats = field(default_factory=EngineStats)
    metrics: EngineObserver | None = None
    # The prefill settings resolved for the device, on the MLX thread before the first step.
    _prefill: Prefill = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._init_thread()
        self._release = False
        self._samplers: dict[tuple[float, float, int], Any] = {}
        self._outbox: Outbox[GenerationStream] = Outbox(self.stream_window)
        self._batch_model: Any = None  # what the batch generator runs: the model, or a pair
        self._kv_group: int | None = None
        self._metrics: ModelObserver | None = None
        self._solo: SoloSequence | None = None  # the lone sequence decoding outside the batch
        self._solo_uids = itertools.count(-1, -1)  # never a BatchGenerator uid
        # Whether prompts leave a prompt-cache entry where their prefill ends (`_checkpoint`).
        self._checkpointing = False
        # Owned by the MLX thread: KV caches of finished turns, found by longest token prefix.
        self._prompt_cache = (
            new_prompt_cache(self.prompt_cache_max_entries, self.prompt_cache_max_bytes)
            if self.prompt_cache_max_entries > 0
            else None
        )
        self._disk: PromptDisk | None = None
        self._draft_path: Path | None = None

    # --- called from asyncio -------------------------------------------------------------
    @property
    def _capacity(self) -> int:
        return self.max_batch_size + self.max_queued_requests

    def _took(self, result: LoadedModel) -> LoadedModel:
        return result

    def stop(self, timeout: float = 10.0) -> None:
        """`ModelThread.stop`, then the disk tier's queued writes (two entries at most) are
        finished: a graceful shutdown keeps the last turns for the next start."""
        super().stop(timeout)
        if self._disk is not None:
            self._disk.flush(30.0)

    def _released(self) -> None:
        self._prompt_cache = None
        if self._disk is not None:
            self._disk.close()
            self._disk = None
        self._samplers.clear()

    def submit(
        self,
        prompt: Sequence[int],
        sampling: SamplingParams,
        logits_processors: Sequence[LogitsProcessor] = (),
        checkpoints: Sequence[int] = (),
    ) -> GenerationStream:
        """Queues a generation; raises QueueFullError when the queue is full.

        `checkpoints`: prompt positions other prompts are likely to share (where a system turn
        ends, a client's cache breakpoints); with `takes_checkpoints`, the prefill leaves a
        prompt-cache entry at each (the deepest `MAX_CHECKPOINTS`).
        """
        self._admit()
        stream = GenerationStream(self, asyncio.get_running_loop())
        # --isolate-keys: the caller's owner (bound on this loop) keeps a prompt cache of its
        # own, so no key learns from a hit (cached_tokens, the first token's time) what
        # another key has sent.
        scope = OWNER.get() or ""
        self._commands.put(
            _Submit(
                stream,
                list(prompt),
                sampling,
                list(logits_processors),
                tuple(sorted(set(checkpoints))[-MAX_CHECKPOINTS:]),
                scope=scope,
            )
        )
        return stream

    @property
    def takes_checkpoints(self) -> bool:
        """Whether prompts leave prompt-cache entries where their prefill ends (and at their
        `checkpoints`): the model's caches cannot be trimmed back (`_checkpoint`)."""
        return self._checkpointing

    def cancel(self, stream: GenerationStream) -> None:
        """Asks the thread to drop `stream`'s sequence before its next step."""
        self._commands.put(_Cancel(stream))

    # --- the MLX thread --------------------------------------------------------------------
    def _emit(self, stream: GenerationStream, chunk: Chunk) -> None:
        self._emit_all([(stream, chunk)])

    def _emit_all(self, items: list[tuple[GenerationStream, Chunk]]) -> None:
        """Hands a decode step's chunks to the outbox (coalesced; one wake-up per loop)."""
        finished = sum(1 for _, chunk in items if chunk.finish_reason is not None)
        if finished:
            with self._lock:
                self._in_flight -= finished
        now = time.perf_counter()
        for stream, chunk in items:
            self._outbox.put(stream, stream._loop, chunk, now)

    def _new_generator(self) -> Any:
        tokenizer = self.loaded.tokenizer
        if self.engine == "slots":
            speculation = None
            if self.speculative in ("ngram", "draft"):
                drafted = self._batch_model if isinstance(self._batch_model, DraftedModel) else None
                speculation = SlotSpeculation(self.num_draft_tokens, drafted)
            slots = SlotGenerator(
                self._batch_model,
                stop_tokens=[[t] for t in sorted(tokenizer.eos_token_ids)],
                completion_batch_size=self.max_batch_size,
                prefill_batch_size=self._prefill.batch_size,
                prefill_step_size=self.prefill_step_size,
                speculation=speculation,
                kv_bits=self.kv_bits if self._kv_group is not None else None,
                kv_group=self._kv_group,
            )
            slots.prompt_ends = self._checkpointing
            return slots
        generator = BatchGenerator(
            self._batch_model,
            stop_tokens=[[t] for t in sorted(tokenizer.eos_token_ids)],
            completion_batch_size=self.max_batch_size,
            prefill_batch_size=self._prefill.batch_size,
            prefill_step_size=self.prefill_step_size,
        )
        # Its prefill pieces never end on one token (prefill_batch.py).
        generator._prompt_batch = PiecewisePromptBatch.empty(
            self._batch_model, generator.sampler, prefill_step_size=self.prefill_step_size
        )
        # NOTE: swaps in our decode batch before anything joins it; prefill stays mlx-lm's.
        if self.speculative in ("ngram", "draft"):
            batch = SpeculativeGenerationBatch.empty(self._batch_model, generator.sampler)
            batch.num_draft = self.num_draft_tokens
            if isinstance(self._batch_model, DraftedModel):
                batch.drafted = self._batch_model
            generator._generation_batch = batch
        else:
            generator._generation_batch = GrammarGenerationBatch.empty(
                self._batch_model, generator.sampler
            )
        return generator

    @staticmethod
    def _speculation(
        generator: BatchGenerator | SlotGenerator,
    ) -> SpeculativeGenerationBatch | SlotSpeculation | None:
        if isinstance(generator, SlotGenerator):
            return generator.speculation
        batch = generator._generation_batch
        return batch if isinstance(batch, SpeculativeGenerationBatch) else None

    def _run(self, ready: concurrent.futures.Future[LoadedModel]) -> None:
        try:
            loaded = self._loaded = self.load()
            self._batch_model = loaded.model
            plain = plain_caches(loaded.model)
            slots_fit = slots_serve(loaded.model)
            if self.engine == "auto":
                self.engine = self._auto_engine(slots_fit)
            if self.engine == "slots" and not slots_fit:
                raise ConfigError(
                    "--engine slots needs plain KV caches or one sliding window on every "
                    f"layer; {loaded.path} mixes windows or has recurrent layers "
                    "(use --engine batch)"
                )
            if self.speculative == "ngram" and not plain and self.engine == "batch":
                # NOTE: a startup warning, as for --kv-bits: rejected drafts need a cache that
                # rewinds, so these sequences decode without drafts (speculative.py); the
                # slots rewind any window (slot_speculation.py).
                log.warning(
                    "--speculative ngram has no effect on %s: its KV caches rotate "
                    "(sliding window) or are recurrent",
                    loaded.alias,
                )
            models = [loaded.model]
            if self.speculative == "draft":
                self._batch_model = self._drafted(loaded)
                models.append(self._batch_model.draft)
            if self.kv_bits is not None:
                groups = [kv_group_size(m) for m in models]
                self._kv_group = None if None in groups else min(g for g in groups if g)
                if self._kv_group is None:
                    # NOTE: a startup warning, not a failure: the flag is a memory hint.
                    log.warning("--kv-bits ignored: this model's KV cannot be quantized")
            device = device_kind()
            self._prefill = prefill_for_device(
                device,
                self.max_batch_size,
                self.prefill_batch_size,
                self.max_prefill_tokens_per_step,
            )
            log.info(
                "engine %s on %s: %d prompts prefilled together, %d prompt tokens per decode "
                "step, scheduled by %s",
                self.name,
                device,
                self._prefill.batch_size,
                self._prefill.tokens_per_step,
                "fixed KV slots" if self.engine == "slots" else "mlx-lm's BatchGenerator",
            )
            self._checkpointing = self._prompt_cache is not None and not plain
            if self._prompt_cache is not None and self.prompt_cache_dir is not None:
                kv = self.kv_bits if self._kv_group is not None else None
                self._disk = open_disk(
                    self.prompt_cache_dir,
                    self.prompt_cache_disk_bytes,
                    loaded,
                    f"kv={kv}/{self._kv_group}",
                    self._draft_path,
                )
            generator = self._new_generator()
            if self.metrics is not None:
                self._metrics = self.metrics.for_model(loaded.alias)
        except BaseException as exc:
            # Nothing loaded: the thread ends (a retry starts a new one).
            self._loaded = None
            self._stopped.set()
            ready.set_exception(exc)
            return
        ready.set_result(loaded)
        active: dict[int, _Active] = {}
        by_stream: dict[int, int] = {}
        try:
            while True:
                commands = []
                if not active:
                    commands.append(self._commands.get())
                    if self.batch_wait > 0:
                        commands += self._burst(time.perf_counter())
                while True:
                    try:
                        commands.append(self._commands.get_nowait())
                    except queue.Empty:
                        break
                # A burst gathered by the wait starts together: the solo path is for one alone.
                alone = self.batch_wait <= 0 or sum(isinstance(c, _Submit) for c in commands) == 1
                for command in commands:
                    if isinstance(command, Stop):
                        self._release = command.release
                        for entry in active.values():
                            self._finished(entry, "cancelled")
                            self._emit(entry.stream, Chunk("", 0, "cancelled"))
                        return
                    if isinstance(command, _Submit):
                        if alone and self._solo_fits(command, active):
                            self._start_solo(generator, command, active, by_stream)
                            continue
                        if self._solo is not None:
                            self._handover(generator, active, by_stream)
                        self._insert(generator, command, active, by_stream)
                    else:
                        uid = by_stream.pop(id(command.stream), None)
                        if uid is not None and uid in active:
                            if self._solo is not None and self._solo.uid == uid:
                                self._solo = None
                            else:
                                generator.remove([uid])
                            if (spec := self._speculation(generator)) is not None:
                                spec.forget(uid)
                            entry = active.pop(uid)
                            self.stats.cancelled += 1
                            self._count(active)
                            self._finished(entry, "cancelled")
                            self._emit(entry.stream, Chunk("", 0, "cancelled"))
                if not active:
                    continue
                try:
                    if self._solo is not None:
                        self._step_solo(self._solo, active, by_stream)
                    else:
                        self._step(generator, active, by_stream)
                    self._outbox.flush(time.perf_counter())
                except Exception as exc:  # a failed step fails its batch, not the server
                    log.exception("decode step failed; failing %d requests", len(active))
                    for entry in active.values():
                        self._finished(entry, "error")
                        self._emit(entry.stream, Chunk("", 0, "error", error=str(exc)))
                    active.clear()
                    by_stream.clear()
                    self._solo = None
                    self._count(active)
                    generator.close()
                    generator = self._new_generator()
        finally:
            self.alive = False
            generator.close()
            for entry in active.values():
                self._emit(
                    entry.stream,
                    Chunk("", 0, "error", error="generation worker stopped"),
                )
            if not self._release:
                self._park()
            self._stopped.set()

    def _burst(self, first: float) -> list[_Submit | _Cancel | Stop]:
        """Idle, a request came: what else comes within `batch_wait` of the last arrival (and
        of 4 waits since the first), to start as one batch."""
        commands: list[_Submit | _Cancel | Stop] = []
        deadline = first + 4 * self.batch_wait
        while (now := time.perf_counter()) < deadline:
            try:
                commands.append(self._commands.get(timeout=min(self.batch_wait, deadline - now)))
            except queue.Empty:
                break
        return commands

    def _auto_engine(self, slots_fit: bool) -> str:
        """`--engine auto`: our fixed slots where they are measured faster and serve everything
        asked (a CPU; the model's caches are ones they hold: `slots_fit`; with speculation or
        quantized KV too), else mlx-lm's batch.

        NOTE: a GPU keeps mlx-lm's BatchGenerator until the slots are measured on one.
        """
        return "slots" if slots_fit and device_kind() == "cpu" else "batch"

    def _drafted(self, loaded: LoadedModel) -> DraftedModel:
        """The served model paired with its draft model (loaded here, on the MLX thread)."""
        if self.load_draft is None:
            raise DraftModelError("--speculative draft needs --draft-model")
        draft = self.load_draft()
        check_draft(loaded, draft)
        self._draft_path = draft.path  # part of the disk tier's identity
        log.info("draft model %s drafts for %s", draft.path, loaded.alias)
        return DraftedModel(loaded.model, draft.model, loaded.vocab_size or len(loaded.tokenizer))

    def _park(self) -> NoReturn:
        """Never returns: the thread stays blocked until the process exits.

        NOTE: MLX keeps a thread-local compile cache whose destructor takes the GIL; run at
        thread exit, it can race interpreter shutdown and abort the process (std::terminate).
        A parked thread never runs it.
        """
        self._stopped.set()
        while True:
            threading.Event().wait()

    def _new_cache(self) -> list[Any]:
        """An empty cache for one sequence: quantized under --kv-bits (when the model's KV can
        be), else the model's own."""
        if self._kv_group is not None and self.kv_bits is not None:
            return new_sequence_cache(self._batch_model, self._kv_group, self.kv_bits)
        return make_prompt_cache(self._batch_model)

    @property
    def _solo_allowed(self) -> bool:
        """Whether this worker decodes lone sequences outside the batch at all."""
        return self.solo and self.speculative == "off"

    def _solo_fits(self, command: _Submit, active: dict[int, _Active]) -> bool:
        """Whether `command` may decode alone: nothing else held, nothing the solo path lacks.

        An empty prompt goes to the batch, which refuses it as before.
        """
        return (
            self._solo_allowed
            and not active
            and bool(command.prompt)
            and not command.logits_processors
        )

    def _start_solo(
        self,
        generator: BatchGenerator,
        command: _Submit,
        active: dict[int, _Active],
        by_stream: dict[int, int],
    ) -> None:
        s = command.sampling
        cache, rest = self._cached_prefix(command.prompt, command.scope)
        cached = len(command.prompt) - len(rest)
        uid = next(self._solo_uids)
        stops = self._stops(command, cached)
        self._solo = SoloSequence(
            self._batch_model,
            generator.stream,
            uid=uid,
            prompt=rest,
            cache=cache if cache is not None else self._new_cache(),
            cached=command.prompt[:cached],
            sampler=self._sampler(s),
            max_tokens=s.max_tokens,
            stop_tokens=self.loaded.tokenizer.eos_token_ids,
            prefill_step_size=self.prefill_step_size,
            checkpoints=stops,
        )
        self.stats.solo_sequences += 1
        self._admitted(command, uid, cached, active, by_stream)

    def _stops(self, command: _Submit, cached: int) -> list[int]:
        """Where the prompt's prefill leaves entries before its end: its checkpoints, when this
        model takes them, that lie past what was cached and before the prompt's last token."""
        if not self._checkpointing:
            return []
        return [p for p in command.checkpoints if cached < p < len(command.prompt) - 1]

    def _handover(
        self, generator: BatchGenerator, active: dict[int, _Active], by_stream: dict[int, int]
    ) -> None:
        """Moves the solo sequence into the batch: its token in flight is sent, then fed there."""
        solo, self._solo = self._solo, None
        assert solo is not None
        handover = solo.handover()
        if handover.emitted is not None:
            self._deliver([handover.emitted], active, by_stream)
        entry = active.pop(solo.uid, None)
        if entry is None:  # it finished on that token
            return
        self.stats.handovers += 1
        # A prefill handed over before its checkpoints still leaves entries there.
        splits = [point - len(handover.all_tokens) for point in solo.checkpoints]
        (uid,) = generator.insert_segments(
            [_segments(handover.prompt, splits)],
            max_tokens=[handover.max_tokens],
            caches=[handover.cache],
            all_tokens=[handover.all_tokens],
            samplers=[handover.sampler],
            logits_processors=[[]],
        )
        active[uid] = entry
        by_stream[id(entry.stream)] = uid

    def _resume_solo(
        self, generator: BatchGenerator, active: dict[int, _Active], by_stream: dict[int, int]
    ) -> None:
        """A batch down to one unconstrained sequence, with nobody waiting, decodes it alone."""
        if not self._solo_allowed or not self._commands.empty():
            return
        if isinstance(generator, SlotGenerator):
            alone = generator.take_alone()
        else:
            alone = _take_alone(generator, active)
        if alone is None:
            return
        uid = alone.uid
        solo = SoloSequence.resumed(
            self._batch_model,
            generator.stream,
            uid=next(self._solo_uids),
            cache=alone.cache,
            tokens=alone.tokens,
            pending=alone.pending,
            sampler=alone.sampler,
            max_tokens=alone.max_tokens,
            stop_tokens=self.loaded.tokenizer.eos_token_ids,
            prefill_step_size=self.prefill_step_size,
        )
        entry = active.pop(uid)
        active[solo.uid] = entry
        by_stream[id(entry.stream)] = solo.uid
        self._solo = solo
        self.stats.solo_sequences += 1

    def _step_solo(
        self, solo: SoloSequence, active: dict[int, _Active], by_stream: dict[int, int]
    ) -> None:
        response = solo.step()
        if response is None:
            if self._checkpointing and solo.at_checkpoint and (entry := active.get(solo.uid)):
                # The solo cache goes on decoding: the entry is a copy of it.
                self._checkpoint(list(solo.tokens), copy.deepcopy(solo.cache), entry)
            return
        if response.finish_reason is not None:
            self._solo = None
        self._deliver([response], active, by_stream)

    def _admitted(
        self,
        command: _Submit,
        uid: int,
        cached: int,
        active: dict[int, _Active],
        by_stream: dict[int, int],
    ) -> None:
        active[uid] = _Active(
            command.stream,
            self.loaded.tokenizer.detokenizer,
            cached_tokens=cached,
            logprobs=command.sampling.logprobs,
            submitted_at=command.submitted_at,
            scope=command.scope,
            prompt_tokens=len(command.prompt),
            written_to=cached,
        )
        if self._metrics is not None:
            self._metrics.prompt(len(command.prompt), cached)
        by_stream[id(command.stream)] = uid

    def _insert(
        self,
        generator: BatchGenerator,
        command: _Submit,
        active: dict[int, _Active],
        by_stream: dict[int, int],
    ) -> None:
        s = command.sampling
        cache, rest = self._cached_prefix(command.prompt, command.scope)
        cached = len(command.prompt) - len(rest)
        if cache is None and self._kv_group is not None:
            cache = self._new_cache()
        splits = [point - cached for point in self._stops(command, cached)]
        try:
            (uid,) = generator.insert_segments(
                [_segments(rest, splits)],
                max_tokens=[s.max_tokens],
                caches=[cache],
                all_tokens=[command.prompt[:cached]],
                samplers=[self._sampler(s)],
                logits_processors=[command.logits_processors],
            )
        except Exception as exc:
            log.exception("could not insert a request")
            self._emit(command.stream, Chunk("", 0, "error", error=str(exc)))
            return
        self._admitted(command, uid, cached, active, by_stream)
        spec = self._speculation(generator)
        if spec is not None and s.temperature == 0 and not command.logits_processors:
            # NOTE: only greedy, unconstrained sequences speculate; the rest decode normally
            # in the same batch step (grammar/penalty processors need per-token state).
            spec.eligible.add(uid)
        if self._prompt_cache is not None:
            # Caches of running sequences count against the same budget.
            self._prompt_cache.trim_to(
                n_bytes=self.prompt_cache_max_bytes - generator.prompt_cache_nbytes
            )

    def _logprobs(self, token: int, logprobs: mx.array, top: int) -> tuple[TokenLogprob, ...]:
        if top < 0:
            return ()
        decode = self.loaded.tokenizer.decode
        alternatives: tuple[tuple[str, float], ...] = ()
        values = np.array(logprobs, dtype=np.float32)
        if top > 0:
            ids = np.argpartition(-values, top - 1)[:top]
            ranked = ids[np.argsort(-values[ids])]
            alternatives = tuple((decode([int(i)]), float(values[i])) for i in ranked)
        return (TokenLogprob(decode([token]), float(values[token]), alternatives),)

    def _sampler(self, s: SamplingParams) -> Any:
        """One sampler object per setting: mlx-lm samples a batch in one call when they match."""
        if s.seed is not None:
            return seeded_sampler(s.temperature, s.top_p, s.top_k, s.seed)
        key = (s.temperature, s.top_p, s.top_k)
        if key not in self._samplers:
            self._samplers[key] = shared_sampler(s.temperature, s.top_p, s.top_k)
        return self._samplers[key]

    def _cache_key(self, scope: str) -> str:
        """The prompt cache's model key for `scope`: one trie per model and owner."""
        return f"{self.loaded.alias}\x1f{scope}" if scope else self.loaded.alias

    def _cached_prefix(self, prompt: list[int], scope: str) -> tuple[Any, list[int]]:
        """The KV cache of the longest cached prefix and the tokens still to prefill."""
        if self._prompt_cache is None:
            return None, prompt
        cache, rest = self._prompt_cache.fetch_nearest_cache(self._cache_key(scope), prompt)
        if self._disk is not None:
            cache, rest = self._disk.fetch(self._cache_key(scope), prompt, cache, rest)
        if cache is not None and not rest:
            # An exact hit still needs one token to produce the next logits.
            if not can_trim_prompt_cache(cache):
                return None, prompt
            trim_prompt_cache(cache, 1)
            rest = prompt[-1:]
        if cache is None:
            self.stats.prompt_cache_misses += 1
        else:
            self.stats.prompt_cache_hits += 1
            self.stats.cached_tokens += len(prompt) - len(rest)
        return cache, rest

    def _checkpoint(self, tokens: list[int], cache: list[Any], entry: _Active) -> None:
        """Caches a prompt's KV where a segment of its prefill ended: its system turn's end or
        a client's cache breakpoint (`checkpoints`), or the prompt but for its last token (the
        decode step feeds it); for models whose caches cannot be trimmed (a sliding window
        that has rotated, a recurrent state).

        A finished turn's entry serves only a prompt that extends it token for token. The next
        turn rarely does: the template renders the reply in its own way (reasoning dropped, an
        end-of-turn token where the model stopped), and an exact repeat (a retry, Codex's
        warm-up then its turn) needs its last token fed again. A trimmable cache is cut back
        to where they part; these cannot be, so without this entry such a prompt is prefilled
        whole. mlx-lm's server keeps such entries too (at its prompts' segment ends).
        """
        self._keep(entry, tokens, cache, len(tokens))
        self.stats.prompt_checkpoints += 1

    def _keep(self, entry: _Active, tokens: list[int], cache: list[Any], written: int) -> None:
        """Puts a prompt-cache entry of `entry`'s in memory and, with a disk tier, on disk;
        `written`: the prompt tokens it holds."""
        assert self._prompt_cache is not None
        key = self._cache_key(entry.scope)
        self._prompt_cache.insert_cache(key, tokens, cache)
        if self._disk is not None:
            self._disk.put(key, tokens, cache)
        entry.written_to = max(entry.written_to, written)
        self.stats.prompt_cache_bytes = self._prompt_cache.nbytes

    def _checkpoint_segments(
        self, generator: Any, prompted: list[Any], active: dict[int, _Active]
    ) -> None:
        """The entries of the prompts whose segment ended in the last step (not those that
        began decoding: their prompt is in)."""
        ended = [r.uid for r in prompted if r.end_of_segment and not r.end_of_prompt]
        if ended:
            for uid, (cache, tokens) in generator.extract_cache(ended).items():
                if (entry := active.get(uid)) is not None:  # whose entry it is
                    self._checkpoint(list(tokens), cache, entry)

    def _step(
        self,
        generator: BatchGenerator,
        active: dict[int, _Active],
        by_stream: dict[int, int],
    ) -> None:
        decoding = len(generator._generation_batch) > 0
        if decoding:
            # NOTE: mlx-lm prefills one chunk per prompt after each decode step; sizing the
            # chunk from our budget bounds the stall a long new prompt puts on running streams.
            share = max(1, min(_waiting(generator), generator.prefill_batch_size))
            generator.prefill_step_size = max(1, self._prefill.tokens_per_step // share)
        else:
            generator.prefill_step_size = self.prefill_step_size
        before = generator._counters.prompt_tokens
        prompted, responses = generator.next()
        if self._checkpointing:
            self._checkpoint_segments(generator, prompted, active)
        if decoding:
            prefilled = generator._counters.prompt_tokens - before
            self.stats.prefill_tokens_while_decoding += prefilled
            self.stats.max_prefill_tokens_per_decode_step = max(
                self.stats.max_prefill_tokens_per_decode_step, prefilled
            )
        if responses:
            self._deliver(responses, active, by_stream)
            self._resume_solo(generator, active, by_stream)
        if (spec := self._speculation(generator)) is not None:
            self.stats.draft_tokens = spec.drafted_tokens
            self.stats.accepted_tokens = spec.accepted_tokens
            self.stats.verify_steps = spec.verify_steps

    def _deliver(
        self, responses: Sequence[Any], active: dict[int, _Active], by_stream: dict[int, int]
    ) -> None:
        """A decode step's tokens: detokenized, counted, and handed to the outbox per stream."""
        now = time.perf_counter()
        self.stats.decode_steps += 1
        self.stats.max_batch_seen = max(self.stats.max_batch_seen, len(responses))
        eos = self.loaded.tokenizer.eos_token_ids
        # One chunk per stream and step, however many tokens speculation accepted.
        out: dict[int, tuple[GenerationStream, Chunk]] = {}
        for r in responses:
            entry = active.get(r.uid)
            if entry is None:
                continue
            entry.generated += 1
            self.stats.generated_tokens += 1
            if self._metrics is not None:
                first = entry.generated == 1
                since = now - (entry.submitted_at if first else entry.last_token_at)
                self._metrics.token(since, first)
            entry.last_token_at = now
            detok = entry.detokenizer
            finish = r.finish_reason
            if not (finish == "stop" and r.token in eos):
                detok.add_token(r.token)
            if finish is not None:
                detok.finalize()
                del active[r.uid]
                by_stream.pop(id(entry.stream), None)
                self.stats.completed += 1
                self._finished(entry, finish, now)
                if self._prompt_cache is not None and r.prompt_cache is not None:
                    # The finished turn's entry holds the whole prompt (and the reply).
                    self._keep(entry, list(r.all_tokens), r.prompt_cache, entry.prompt_tokens)
            cached = entry.cached_tokens if entry.generated == 1 else 0
            logprobs = self._logprobs(r.token, r.logprobs, entry.logprobs)
            chunk = Chunk(
                detok.last_segment,
                1,
                finish,
                cached_tokens=cached,
                logprobs=logprobs,
                token_ids=(r.token,),
                cache_written=entry.written_to - entry.cached_tokens if finish else 0,
            )
            earlier = out.get(r.uid)
            out[r.uid] = (entry.stream, chunk if earlier is None else earlier[1].merged(chunk))
        self._emit_all(list(out.values()))
        self.stats.batch_size = len(out)
        self._count(active)

    def _count(self, active: dict[int, _Active]) -> None:
        """Occupancy counters the metrics read: sequences held, and those decoding."""
        self.stats.active = len(active)
        self.stats.running = sum(1 for entry in active.values() if entry.generated)
        self._outbox.streams = self.stats.running
        if not active:
            self.stats.batch_size = 0

    def _finished(self, entry: _Active, reason: str, now: float | None = None) -> None:
        if self._metrics is not None:
            self._metrics.finished(reason, (now or time.perf_counter()) - entry.submitted_at)
