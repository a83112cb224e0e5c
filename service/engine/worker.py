"""The one thread that owns MLX: continuous batching behind the scheduler protocol.

Requests cross into the thread through a queue, read in one place (`_next_commands`); the
worker turns each into an `Admission` (its prompt-cache prefix, sampler, checkpoints) for the
scheduler (`scheduler.py`; which one: `schedulers.py`), steps it, keeps prompt-cache entries
(`prompt_cache/cache.py`), and hands generated text back to the asyncio loop with
`loop.call_soon_threadsafe` (`outbox.py`). Cancellation is honoured between steps.

The loop runs under supervision (`_serve`; `supervision.py` says what it does): a pass that
fails fails what it held and the loop goes on with a new scheduler and prompt-cache memory,
until the engine has failed too often, when it ends and tells its owner (the model pool unloads
the model). A warm-up at load runs through the same scheduler (`warm_up.py`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import queue
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine import drafting
from mlx_responses.service.engine.admission import AdmissionQueue
from mlx_responses.service.engine.admitted import look_up
from mlx_responses.service.engine.commands import (
    CHECKPOINT_INTERVAL,
    MAX_CHECKPOINTS,
    Cancel,
    Command,
    Submit,
    stops,
    unserved,
)
from mlx_responses.service.engine.delivery import Active, token_logprobs
from mlx_responses.service.engine.distributed.link import Lockstep
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.kv_quant import kv_group_size, new_sequence_cache
from mlx_responses.service.engine.kv_store import open_store
from mlx_responses.service.engine.memory.budget import MemoryBudget
from mlx_responses.service.engine.memory.device import give_back_memory
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.model import LoadedModel, plain_caches
from mlx_responses.service.engine.model_thread import ModelThread, Stop
from mlx_responses.service.engine.observer import EngineObserver
from mlx_responses.service.engine.outbox import Outbox
from mlx_responses.service.engine.prompt_cache.expiry import Lifetimes
from mlx_responses.service.engine.requests import (
    Chunk,
    EngineStats,
    LogitsProcessor,
    SamplingParams,
)
from mlx_responses.service.engine.scheduler import Admission, Scheduler, Token
from mlx_responses.service.engine.schedulers import (
    SCHEDULED_BY,
    new_scheduler,
    resolve_engine,
    speculation_for,
)
from mlx_responses.service.engine.seeded_sampler import Samplers
from mlx_responses.service.engine.stream import GenerationStream
from mlx_responses.service.engine.supervision import (
    Restarts,
    ended,
    failure_reason,
    restarted,
    stopped,
)
from mlx_responses.service.engine.vision.side import ImageEncoder, VisionSide
from mlx_responses.service.engine.warm_up import MAX_TOKENS as WARM_UP_TOKENS
from mlx_responses.service.engine.warm_up import WarmUp, warm
from mlx_responses.service.flags import Prefill, prefill_for_device
from mlx_responses.service.ids import OWNER

log = logging.getLogger(__name__)


def device_kind() -> str:
    """The kind of MLX's default device: "gpu" (Metal or CUDA) or "cpu"."""
    return "gpu" if mx.default_device().type == mx.gpu else "cpu"


class _GaveUp(Exception):
    """The engine failed too often to go on (supervision.Restarts)."""


@dataclass
class Held:
    """What the loop holds across passes: sequences running (`active`, by uid; `by_stream`:
    the uid of each stream), commands read and not yet taken, requests being admitted now."""

    active: dict[int, Active[GenerationStream]] = field(default_factory=dict)
    by_stream: dict[int, int] = field(default_factory=dict)
    commands: deque[Command] = field(default_factory=deque)
    in_hand: list[Submit] = field(default_factory=list)
    joined: bool = False  # whether this step's admissions already took a second pass
    stepping: bool = False  # in a decode step

    def submits(self) -> list[Submit]:
        return [c for c in self.commands if isinstance(c, Submit)]


@dataclass
class EngineWorker(ModelThread[LoadedModel]):
    """Owns the model and its scheduler on a dedicated thread.

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
    # Caches that cannot be trimmed: a prefill also stops for an entry every this many tokens
    checkpoint_interval: int = CHECKPOINT_INTERVAL
    # The prompt cache's disk tier (prompt_cache/disk.py): its folder (None: none) and byte budget.
    prompt_cache_dir: Path | None = None
    prompt_cache_disk_bytes: int = 0
    # "off", "ngram" (prompt-lookup drafts) or "draft" (drafts of `load_draft`'s model), for
    # greedy sequences
    speculative: str = "off"
    num_draft_tokens: int = 4
    # Draft with the checkpoint's own MTP head where it has one (mtp.py), unless `speculative`
    # asks for another drafter.
    mtp: bool = True
    load_draft: Callable[[], LoadedModel] | None = None
    # The --draft-model folder: an EAGLE-3 or DFlash head's drafts as a head (draft_folder.py)
    draft_folder: Path | None = None
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
    # joins the batch when a second request arrives (service/engine/solo/).
    solo: bool = True
    encoder: ImageEncoder = field(default_factory=ImageEncoder)  # a vision model's images
    stats: EngineStats = field(default_factory=EngineStats)
    metrics: EngineObserver | None = None
    clock: Callable[[], float] = time.time  # the prompt-cache entries' lifetimes' (tests: any)
    memory: MemoryBudget | None = None  # the process's budget (--memory-limit; kv_store.py)
    link: Lockstep | None = None  # in a group, commands cross the ranks (distributed/lockstep)
    # Failures within a window after which the engine gives up (supervision.py).
    restarts: Restarts = field(default_factory=Restarts)
    # Called on the engine thread with the reason once the engine gave up (the pool unloads
    # the model; supervision.py).
    on_failure: Callable[[str], None] | None = None
    # The prefill settings resolved for the device, on the MLX thread before the first step.
    _prefill: Prefill = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._init_thread()
        self._release = False
        self._samplers = Samplers()
        self._outbox: Outbox[GenerationStream] = Outbox(self.stream_window)
        self._batch_model: Any = None  # what the scheduler runs: the model, or a pair
        self._kv_group: int | None = None
        self._uids = itertools.count()  # the sequences' uids, whichever scheduler holds them
        # Whether prompts leave a prompt-cache entry where their prefill ends (`_checkpoint`).
        self._checkpointing = False
        # Requests wait for memory (the KV store: `self.kv`, made once the model is loaded).
        self._waiting = AdmissionQueue[Submit](self.stats)
        self._draft_path: Path | None = None
        self._vision: VisionSide | None = None  # a vision model's (vision/side.py)
        self._head: str | None = None  # the drafting head's kind (and folder), if one drafts

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
        self.kv.flush(30.0)

    def _finish_writes(self) -> None:
        # An unloaded model's next load reads the disk tier: its last entries must be there.
        self.kv.flush(30.0)

    def _released(self) -> None:
        self.kv.close()
        self._samplers.clear()

    def submit(
        self,
        prompt: Sequence[int],
        sampling: SamplingParams,
        logits_processors: Sequence[LogitsProcessor] = (),
        checkpoints: Sequence[int] = (),
        *,
        vision: VisionInputs | None = None,
        retention: Lifetimes | None = None,
    ) -> GenerationStream:
        """Queues a generation; raises QueueFullError when the queue is full, MemoryLimitError
        when it could never fit the memory budget.

        `checkpoints`: prompt positions other prompts are likely to share (where a system turn
        ends, a client's cache breakpoints); with `takes_checkpoints`, the prefill leaves a
        prompt-cache entry at each (the deepest `MAX_CHECKPOINTS`); `retention`: their lifetimes.
        """
        self.check_memory(len(prompt), sampling.max_tokens)
        self._admit()
        stream = GenerationStream(self, asyncio.get_running_loop())
        # --isolate-keys: the caller's owner (bound on this loop) keeps a prompt cache of its
        # own, so no key learns from a hit (cached_tokens, the first token's time) what
        # another key has sent.
        scope = OWNER.get() or ""
        self._commands.put(
            Submit(
                stream,
                list(prompt),
                sampling,
                list(logits_processors),
                tuple(sorted(set(checkpoints))[-MAX_CHECKPOINTS:]),
                scope=scope,
                vision=vision,
                retention=retention,
            )
        )
        return stream

    @property
    def takes_checkpoints(self) -> bool:
        """Whether prompts leave prompt-cache entries where their prefill ends (and at their
        `checkpoints`): the model's caches cannot be trimmed back (`prompt_cache/cache.py`)."""
        return self._checkpointing

    def cancel(self, stream: GenerationStream) -> None:
        """Asks the thread to drop `stream`'s sequence before its next step."""
        self._commands.put(Cancel(stream))

    def warm_up(
        self, prompt: Sequence[int], processors: Sequence[LogitsProcessor] = ()
    ) -> asyncio.Future[float]:
        """Generates a few tokens of `prompt` on the engine thread, at the model's default
        sampling, leaving no trace (warm_up.py); resolves to the seconds it took (0: skipped,
        requests being served)."""
        command = WarmUp(list(prompt), list(processors))
        self._commands.put(command)
        return asyncio.wrap_future(command.done)

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

    def _new_scheduler(self) -> Scheduler:
        kv = None
        if self._kv_group is not None and self.kv_bits is not None:
            kv = (self.kv_bits, self._kv_group)
        scheduler = new_scheduler(
            self.engine,
            self._batch_model,
            stop_tokens=self.loaded.tokenizer.eos_token_ids,
            max_batch_size=self.max_batch_size,
            prefill=self._prefill,
            prefill_step_size=self.prefill_step_size,
            speculative=self.speculative,
            num_draft_tokens=self.num_draft_tokens,
            kv=kv,
            solo=self.solo,
            stats=self.stats,
            new_cache=self._new_cache,
            vision=self._vision,
        )
        scheduler.prompt_ends = self._checkpointing
        scheduler.entry_room = self.kv.entry_room  # copies of live KV within the budget
        return scheduler

    def _run(self, ready: concurrent.futures.Future[LoadedModel]) -> None:
        try:
            loaded = self._loaded = self.load()
            asked = self.speculative  # a vision model's is off (its head may still draft)
            if (vision := VisionSide.of(loaded, self.encoder)) is not None:  # slots, batch, serial
                self._vision, self.solo, self.speculative, self.kv_bits = vision, False, "off", None
                self.engine = vision.engine
            self._batch_model = vision.language if vision and vision.batched else loaded.model
            plain = self.engine == "serial" or plain_caches(self._batch_model)  # keeps no entry
            if self.engine != "serial":
                self.engine = resolve_engine(self.engine, self._batch_model, device_kind())
            self.speculative = speculation_for(self.engine, self.speculative, loaded.alias)
            models = [loaded.model]
            # A head rides in mlx-lm's batch: a text model's, or a VLM's batched there.
            holds_head = self.engine != "serial" and (vision is None or vision.engine == "batch")
            chosen = drafting.choose(
                loaded,
                self._batch_model,
                speculative=self.speculative,
                mtp=self.mtp and asked == "ngram" and holds_head,
                draft_folder=self.draft_folder,
                load_draft=self.load_draft,
            )
            self._batch_model, self.speculative = chosen.model, chosen.speculative
            self._draft_path, self._head = chosen.draft_path, chosen.head
            if chosen.weights is not None:
                models.append(chosen.weights)
            if chosen.head is not None and self.engine == "slots":
                log.info("%s drafts with a %s head on mlx-lm's batch", loaded.alias, chosen.head)
                self.engine = "batch"  # the slots do not hold a head's caches
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
                SCHEDULED_BY[self.engine],
            )
            self.kv = open_store(
                self,
                loaded,
                models,
                kv_group=self._kv_group,
                prefill_rows=self._prefill.batch_size,
                device=device,
                slots=self.engine == "slots",
                draft=self._draft_path,
                head=self._head,
            )
            self._checkpointing = self.kv.prompt is not None and not plain
            scheduler = self._new_scheduler()
            if self.speculative == "ngram" and not plain and not scheduler.rewinds_any_window:
                # NOTE: a startup warning, as for --kv-bits: rejected drafts need a cache that
                # rewinds, so these sequences decode without drafts (batch/speculative.py).
                log.warning(
                    "--speculative ngram has no effect on %s: its KV caches rotate "
                    "(sliding window) or are recurrent",
                    loaded.alias,
                )
            if self.metrics is not None:
                self._metrics = self.metrics.for_model(loaded.alias)
        except BaseException as exc:
            # Nothing loaded: the thread ends (a retry starts a new one).
            self._loaded = None
            self._stopped.set()
            ready.set_exception(exc)
            return
        ready.set_result(loaded)
        self._serve(scheduler)

    def _serve(self, scheduler: Scheduler) -> None:
        """The thread's loop: passes until a Stop, each failure survived (`_restart`) until
        the engine gives up."""
        held = Held()
        try:
            while True:
                try:
                    if not self._pass(scheduler, held):
                        return
                except Exception as exc:
                    if self.link is not None and not held.stepping:
                        # A group's ranks must run alike: none restarts alone but from a
                        # failed step (every rank fails it: they run the same batch).
                        raise
                    scheduler = self._restart(scheduler, held, exc)
        except BaseException as exc:
            # The loop cannot go on (it gave up, or could not rebuild): what it held and what
            # waited fail, and its owner unloads the model (service/models/pool.py).
            if self.failure is None:
                self.failure = ended(exc)
            if isinstance(exc, _GaveUp):  # its failure is logged (`_restart`)
                log.error("engine %s stopped: %s", self.name, self.failure)
            else:
                log.exception("engine %s stopped: %s", self.name, self.failure)
        finally:
            self.alive = False
            with contextlib.suppress(Exception):
                scheduler.close()
            # What it held and what waited fail now, rather than wait for a loop that is gone.
            error = "generation worker stopped" if self.failure is None else stopped(self.failure)
            streams = [e.stream for e in held.active.values()]
            streams += unserved(self._commands, self._waiting.drain(), held.commands)
            for stream in streams:
                self._emit(stream, Chunk("", 0, "error", error=error))
            # Its owner unloads the model, whose unload joins the thread: it ends. NOTE: not
            # in a group, whose ranks park as before (the group's loss is its own report).
            if self.failure is not None and self.link is None:
                self._release = True
                if self.on_failure is not None:
                    self.on_failure(self.failure)
            if not self._release:
                self._park()
            self._stopped.set()

    def _restart(self, scheduler: Scheduler, held: Held, exc: Exception) -> Scheduler:
        """A pass failed: the requests it held (running, or being admitted) fail with an error
        that says so, and a new scheduler and prompt-cache memory replace the old; requests
        still waiting are served next. Raises _GaveUp when the engine has failed too often."""
        gave_up = self.restarts.failed()
        log.exception(
            "engine %s failed (%d time(s) within %gs); failing %d requests and %s",
            self.name,
            self.restarts.recent,
            self.restarts.window,
            len(held.active) + len(held.in_hand),
            "stopping it" if gave_up else "restarting it",
        )
        reason = failure_reason(exc, self.restarts.recent, self.restarts.window)
        if gave_up:
            self.failure = reason  # before they hear of it: later submits are refused so
        else:
            self.stats.engine_restarts += 1
        if self._metrics is not None:
            self._metrics.engine_failed("stopped" if gave_up else "restarted")
        error = stopped(reason) if gave_up else restarted(exc)
        for entry in held.active.values():
            self._finished(entry, "error")
        streams = {id(e.stream): e.stream for e in held.active.values()}
        streams.update((id(c.stream), c.stream) for c in held.in_hand)
        self._emit_all([(s, Chunk("", 0, "error", error=error)) for s in streams.values()])
        held.active.clear()
        held.by_stream.clear()
        held.in_hand = []
        held.joined = held.stepping = False
        self._count(held.active)
        with contextlib.suppress(Exception):
            scheduler.close()
        self.kv.sync((), 0)  # their reservations go
        self.kv.rebuild()
        # The old scheduler's and prompt cache's buffers go back to the system, as an unload's
        # do (measured: 100 step faults left RSS 229 -> 278 MiB once the caches refilled).
        give_back_memory()
        if gave_up:
            raise _GaveUp(reason) from exc
        return self._new_scheduler()

    def _pass(self, scheduler: Scheduler, held: Held) -> bool:
        """One pass of the loop: the commands, admissions and a step; False on a Stop."""
        active, by_stream = held.active, held.by_stream
        commands, alone = self._next_commands(
            busy=bool(active or self._waiting), stream=scheduler.stream
        )
        held.commands.extend(commands)
        while held.commands:  # one at a time: a command that fails leaves the rest queued
            command = held.commands.popleft()
            if isinstance(command, Stop):
                self._release = command.release
                for entry in active.values():
                    self._finished(entry, "cancelled")
                    self._emit(entry.stream, Chunk("", 0, "cancelled"))
                for waiting in [*self._waiting.drain(), *held.submits()]:
                    self._emit(waiting.stream, Chunk("", 0, "cancelled"))
                return False
            if isinstance(command, Submit):
                self._waiting.offer(command)
            elif isinstance(command, WarmUp):  # at load, before the model serves
                self._warm_up(scheduler, command, busy=bool(active))
            else:
                self._cancel(scheduler, command, active, by_stream)
        # Requests start, first come first served, as the KV store finds them memory.
        self.kv.sync(active, scheduler.nbytes)
        if admitted := self._waiting.admit(self.kv, self._metrics, lambda: next(self._uids)):
            held.in_hand = [command for command, _ in admitted]
            self._start(scheduler, admitted, alone, active, by_stream)
            held.in_hand = []
            # What came while these were admitted (an image's tower call takes a while) is
            # admitted before the step, so it starts in the same one: once a step, so arrivals
            # cannot hold the step back. Not in a group (its ranks run one pass per step).
            if not held.joined and self.link is None and self._commands.qsize():
                held.joined = True
                return True
        if not active:
            time.sleep(0.01 if self._waiting else 0)  # waits for another model's memory
            return True
        held.joined = False
        held.stepping = True
        self._step(scheduler, active, by_stream)
        self._outbox.flush(time.perf_counter())
        held.stepping = False
        return True

    def _next_commands(self, *, busy: bool, stream: Any = None) -> tuple[list[Command], bool]:
        """The commands before the next step, and whether one among them may decode alone
        (`Admission.alone`): the one place the queue is read. Idle (`busy` false), it blocks for
        the next command, then with `batch_wait` gathers what comes within it of the last
        arrival (4 waits at most), so a burst starts as one batch; then all queued. In a group
        (`link`), rank 0 posts them on `stream` and every rank runs those of the last iteration."""
        if self.link is not None and self.link.follows:
            return self.link.receive(stream)
        commands: list[Command] = []
        if not busy:
            with contextlib.suppress(queue.Empty):
                commands.append(self._commands.get(timeout=getattr(self.link, "heartbeat", None)))
            if self.batch_wait > 0 and commands:
                deadline = time.perf_counter() + 4 * self.batch_wait
                while (now := time.perf_counter()) < deadline:
                    try:
                        wait = min(self.batch_wait, deadline - now)
                        commands.append(self._commands.get(timeout=wait))
                    except queue.Empty:
                        break
        while True:
            try:
                commands.append(self._commands.get_nowait())
            except queue.Empty:
                break
        # A burst gathered by the wait starts together: the solo path is for one alone.
        alone = self.batch_wait <= 0 or sum(isinstance(c, Submit) for c in commands) == 1
        if self.link is not None:  # rank 0 of a group: what it read runs an iteration later
            return self.link.send(commands, alone, stream, busy)
        return commands, alone

    def _new_cache(self) -> list[Any]:
        """An empty cache for one sequence: quantized under --kv-bits (when the model's KV can
        be), else the model's own."""
        if self._kv_group is not None and self.kv_bits is not None:
            return new_sequence_cache(self._batch_model, self._kv_group, self.kv_bits)
        return make_prompt_cache(self._batch_model)

    def _warm_up(self, scheduler: Scheduler, command: WarmUp, busy: bool) -> None:
        """Runs a warm-up as a request without a cached prefix, at the model's default
        sampling; never beside requests (they would see its steps)."""
        if busy:
            command.done.set_result(0.0)
            return
        loaded = self.loaded
        admission = Admission(
            next(self._uids),
            [command.prompt],
            WARM_UP_TOKENS,
            self._samplers(loaded.default_temperature, loaded.default_top_p, 0, None),
            command.processors,
            # As a request's without a cached prefix: the scheduler's own, or quantized.
            self._new_cache() if self._kv_group is not None else None,
        )
        warm(scheduler, admission, command.done, self.stats)

    def _start(
        self,
        scheduler: Scheduler,
        admitted: list[tuple[Submit, int]],
        alone: bool,
        active: dict[int, Active[GenerationStream]],
        by_stream: dict[int, int],
    ) -> None:
        """Admits requests, each as its uid (its memory reserved under it): from its longest
        cached prefix, cut at its checkpoints; those admitted together are looked up and their
        images encoded together (`admitted.py`)."""
        for start in look_up(admitted, self._vision, self.kv, self._failed):
            command, uid, cached, s = start.command, start.uid, start.cached, start.command.sampling
            try:
                cache = start.cache
                if cache is None and self._kv_group is not None:
                    cache = self._new_cache()
                sampler = self._samplers(s.temperature, s.top_p, s.top_k, s.seed)
                points = stops(command, cached, self.checkpoint_interval)
                splits = [p - cached for p in points] if self._checkpointing else []
                scheduler.admit(start.admission(sampler, splits, alone, cache))
            except Exception as exc:
                self._failed(command, exc)
                continue
            active[uid] = Active(
                command.stream,
                self.loaded.tokenizer.detokenizer,
                cached_tokens=cached,
                logprobs=s.logprobs,
                submitted_at=command.submitted_at,
                scope=command.scope,
                prompt_tokens=len(command.prompt),
                written_to=cached,
                key=start.key if start.seen is not None else None,
                retention=command.retention,
                system_end=min(command.checkpoints, default=0),
            )
            if self._metrics is not None:
                self._metrics.prompt(len(command.prompt), cached)
            by_stream[id(command.stream)] = uid
        # Caches of running sequences count against the same budget.
        self.kv.settle(scheduler.nbytes)

    def _failed(self, command: Submit, exc: Exception) -> None:
        log.exception("could not insert a request")
        self._emit(command.stream, Chunk("", 0, "error", error=str(exc)))

    def _cancel(
        self,
        scheduler: Scheduler,
        command: Cancel,
        active: dict[int, Active[GenerationStream]],
        by_stream: dict[int, int],
    ) -> None:
        uid = by_stream.pop(id(command.stream), None)
        if uid is None or uid not in active:
            if self._waiting.remove(command.stream) is not None:  # cancelled while it waited
                self.stats.cancelled += 1
                self._emit(command.stream, Chunk("", 0, "cancelled"))
            return
        scheduler.drop([uid])
        entry = active.pop(uid)
        self.stats.cancelled += 1
        self._count(active)
        self._finished(entry, "cancelled")
        self._emit(entry.stream, Chunk("", 0, "cancelled"))

    def _step(
        self,
        scheduler: Scheduler,
        active: dict[int, Active[GenerationStream]],
        by_stream: dict[int, int],
    ) -> None:
        decoding = scheduler.decoding > 0
        if decoding:
            # NOTE: a scheduler prefills one chunk per prompt after each decode step; sizing
            # the chunk from our budget bounds the stall a long new prompt puts on running
            # streams.
            share = max(1, min(scheduler.waiting, self._prefill.batch_size))
            scheduler.prefill_step_size = max(1, self._prefill.tokens_per_step // share)
        else:
            scheduler.prefill_step_size = self.prefill_step_size
        result = scheduler.step()
        for end in result.ends:
            if (entry := active.get(end.uid)) is not None and entry.within(end.tokens):
                self._keep(entry, end.tokens, end.cache, len(end.tokens))
                self.stats.prompt_checkpoints += 1
        if decoding:
            self.stats.prefill_tokens_while_decoding += result.prefilled
            self.stats.max_prefill_tokens_per_decode_step = max(
                self.stats.max_prefill_tokens_per_decode_step, result.prefilled
            )
        if result.tokens:
            self._deliver(result.tokens, active, by_stream)
        if (spec := scheduler.speculation) is not None:
            self.stats.draft_tokens = spec.drafted_tokens
            self.stats.accepted_tokens = spec.accepted_tokens
            self.stats.verify_steps = spec.verify_steps

    def _keep(
        self, entry: Active[GenerationStream], tokens: list[int], cache: list[Any], written: int
    ) -> None:
        """Puts a prompt-cache entry of `entry`'s in memory and on disk (a checkpoint's, or a
        finished turn's: `prompt_cache/cache.py`); `written`: the prompt tokens it holds."""
        kind = entry.kind(len(tokens), written)
        self.kv.keep(entry.scope, entry.keyed(tokens), cache, entry.retention, written, kind=kind)
        entry.written_to = max(entry.written_to, written)

    def _deliver(
        self,
        responses: Sequence[Token],
        active: dict[int, Active[GenerationStream]],
        by_stream: dict[int, int],
    ) -> None:
        """A decode step's tokens: detokenized, counted, and handed to the outbox per stream."""
        now = time.perf_counter()
        self.stats.decode_steps += 1
        # Sequences, not tokens: a verify step sends several tokens of each.
        rows = len({r.uid for r in responses})
        self.stats.max_batch_seen = max(self.stats.max_batch_seen, rows)
        eos = self.loaded.tokenizer.eos_token_ids
        decode = self.loaded.tokenizer.decode
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
                if self.kv.prompt is not None and r.prompt_cache is not None:
                    # The finished turn's entry holds the whole prompt (and the reply).
                    tokens = list(r.all_tokens or ())
                    self._keep(entry, tokens, r.prompt_cache, entry.prompt_tokens)
            logprobs = token_logprobs(decode, r.token, r.logprobs, entry.logprobs)
            chunk = entry.chunk(r, detok.last_segment, logprobs)
            if r.drafted and self._metrics is not None:
                self._metrics.drafted(r.drafted, r.accepted)
            earlier = out.get(r.uid)
            out[r.uid] = (entry.stream, chunk if earlier is None else earlier[1].merged(chunk))
        self._emit_all(list(out.values()))
        self.stats.batch_size = len(out)
        self._count(active)

    def _count(self, active: dict[int, Active[GenerationStream]]) -> None:
        """Occupancy counters the metrics read: sequences held, and those decoding."""
        self.stats.active = len(active)
        self.stats.running = sum(1 for entry in active.values() if entry.generated)
        self._outbox.streams = self.stats.running
        if not active:
            self.stats.batch_size = 0

    def _finished(self, entry: Active[GenerationStream], reason: str, now: float = 0.0) -> None:
        if self._metrics is not None:
            self._metrics.finished(reason, (now or time.perf_counter()) - entry.submitted_at)
