"""The core's Prometheus metrics: engine counters and histograms, state gauges read at scrape.

Names follow vLLM's (`vllm:num_requests_running`, `vllm:time_to_first_token_seconds`, ...) and
TGI's (`tgi_batch_current_size`) with our own `mlx_responses_` prefix.
NOTE: vLLM's `vllm:` prefix uses a colon; Prometheus reserves colons for recording rules, so
ours is an underscore.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)

PREFIX = "mlx_responses_"
MODEL = ("model_name",)
# vLLM's buckets: TTFT spans prefill of long prompts on slow hardware; ITL spans one decode step.
TTFT_BUCKETS = (
    *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75),
    *(1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
)
ITL_BUCKETS = (
    *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75),
    *(1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0),
)
LOAD_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
JOB_STATES = {
    pb.RESPONSE_STATUS_QUEUED: "queued",
    pb.RESPONSE_STATUS_IN_PROGRESS: "in_progress",
}


class ModelMetrics:
    """One model's engine metrics, recorded from the engine thread (prometheus_client locks)."""

    def __init__(self, engine: EngineMetrics, model_name: str) -> None:
        self._ttft = engine.ttft.labels(model_name)
        self._itl = engine.itl.labels(model_name)
        self._e2e = engine.e2e.labels(model_name)
        self._prompt = engine.prompt_tokens.labels(model_name)
        self._cached = engine.cached_tokens.labels(model_name)
        self._generated = engine.generation_tokens.labels(model_name)
        self._drafted = engine.draft_tokens.labels(model_name)
        self._accepted = engine.accepted_draft_tokens.labels(model_name)
        self._success = engine.success
        self._waits = engine.admission_waits.labels(model_name)
        self._wait_seconds = engine.admission_wait_seconds.labels(model_name)
        self._refused = engine.refused
        self._failures = engine.engine_failures
        self._model_name = model_name

    def prompt(self, tokens: int, cached: int) -> None:
        """A request entered the batch with `tokens` prompt tokens, `cached` from the cache."""
        self._prompt.inc(tokens)
        self._cached.inc(cached)

    def token(self, since_previous: float, first: bool) -> None:
        """A token was generated: TTFT for the first, inter-token latency for the others."""
        (self._ttft if first else self._itl).observe(since_previous)
        self._generated.inc()

    def drafted(self, proposed: int, accepted: int) -> None:
        """A verify step proposed `proposed` draft tokens for a request and kept `accepted`."""
        self._drafted.inc(proposed)
        self._accepted.inc(accepted)

    def finished(self, reason: str, elapsed: float) -> None:
        """A request left the engine ('stop', 'length', 'cancelled', 'error')."""
        self._e2e.observe(elapsed)
        self._success.labels(self._model_name, reason).inc()

    def waited(self, seconds: float) -> None:
        """A request waited `seconds` in the queue for memory (--memory-limit) before it ran."""
        self._waits.inc()
        self._wait_seconds.inc(seconds)

    def refused(self, reason: str) -> None:
        """A request was refused before it ran: 'memory' (it can never fit the budget, a 400)
        or 'queue_full' (a 503)."""
        self._refused.labels(self._model_name, reason).inc()

    def engine_failed(self, outcome: str) -> None:
        """The engine's loop failed: 'restarted' or 'stopped' (it gave up)."""
        self._failures.labels(self._model_name, outcome).inc()


class EngineMetrics:
    """The engine's counters and histograms, labelled by model."""

    def __init__(self, registry: CollectorRegistry) -> None:
        p = PREFIX
        self.ttft = Histogram(
            f"{p}time_to_first_token_seconds",
            "Time from submission to the engine until the first generated token.",
            MODEL,
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.itl = Histogram(
            f"{p}inter_token_latency_seconds",
            "Time between two consecutive generated tokens of one request.",
            MODEL,
            buckets=ITL_BUCKETS,
            registry=registry,
        )
        self.e2e = Histogram(
            f"{p}e2e_request_latency_seconds",
            "Time from submission to the engine until the request finished.",
            MODEL,
            buckets=E2E_BUCKETS,
            registry=registry,
        )
        self.prompt_tokens = Counter(
            f"{p}prompt_tokens", "Prompt tokens of requests.", MODEL, registry=registry
        )
        self.cached_tokens = Counter(
            f"{p}prompt_tokens_cached",
            "Prompt tokens served from the prompt (KV) cache.",
            MODEL,
            registry=registry,
        )
        self.generation_tokens = Counter(
            f"{p}generation_tokens", "Generated tokens.", MODEL, registry=registry
        )
        # vLLM's spec_decode_num_draft_tokens and spec_decode_num_accepted_tokens.
        self.draft_tokens = Counter(
            f"{p}spec_decode_draft_tokens",
            "Tokens drafted by speculative decoding (--speculative) and verified.",
            MODEL,
            registry=registry,
        )
        self.accepted_draft_tokens = Counter(
            f"{p}spec_decode_accepted_tokens",
            "Drafted tokens the verify kept (each a generated token one forward sooner).",
            MODEL,
            registry=registry,
        )
        self.success = Counter(
            f"{p}request_success",
            "Requests that left the engine, by finish reason.",
            (*MODEL, "finished_reason"),
            registry=registry,
        )

        self.admission_waits = Counter(
            f"{p}admission_waits",
            "Requests that waited in the queue for memory (--memory-limit) before they ran.",
            MODEL,
            registry=registry,
        )
        self.admission_wait_seconds = Counter(
            f"{p}admission_wait_seconds",
            "Seconds requests waited in the queue for memory (--memory-limit).",
            MODEL,
            registry=registry,
        )
        self.refused = Counter(
            f"{p}requests_refused",
            "Requests refused before they ran: memory (can never fit --memory-limit, 400) or "
            "queue_full (503).",
            (*MODEL, "reason"),
            registry=registry,
        )
        self.engine_failures = Counter(
            f"{p}engine_failures",
            "Failures of a model's engine loop: restarted (the requests it held failed, the "
            "next are served) or stopped (it failed repeatedly: the model is unloaded).",
            (*MODEL, "outcome"),
            registry=registry,
        )

    def for_model(self, model_name: str) -> ModelMetrics:
        return ModelMetrics(self, model_name)


@dataclass(frozen=True)
class ModelState:
    """One configured model's gauges (all 0 while it is not loaded)."""

    model_name: str
    loaded: bool
    running: int = 0
    waiting: int = 0
    batch_size: int = 0
    prompt_cache_bytes: int = 0


@dataclass(frozen=True)
class Snapshot:
    """The core's state as read on the event loop just before a scrape renders."""

    models: list[ModelState]
    jobs: dict[str, int]
    stores: dict[str, tuple[int, int, int]]  # entries, bytes, evictions
    mlx_memory: tuple[int, int] | None  # active, cache bytes (None before MLX is in use)
    # The memory budget: per loaded model its bytes by kind (weights, kv, prompt_cache,
    # image_cache), the runtime's bytes, and the limit (None: none).
    memory: dict[str, dict[str, int]] = field(default_factory=dict)
    runtime_bytes: int = 0
    memory_limit: int | None = None


class _StateCollector(Collector):
    """Gauges of the core's state, from the last snapshot (taken by CoreMetrics.render)."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        if s is None:
            return
        p = PREFIX
        for name, attr, doc in (
            ("num_requests_running", "running", "Requests decoding in the batch."),
            ("num_requests_waiting", "waiting", "Requests queued or prefilling."),
            ("batch_current_size", "batch_size", "Sequences in the last decode step."),
            ("prompt_cache_bytes", "prompt_cache_bytes", "Bytes held by the prompt cache."),
            ("model_loaded", "loaded", "1 while the model's weights are in memory, else 0."),
        ):
            gauge = GaugeMetricFamily(f"{p}{name}", doc, labels=MODEL)
            for model in s.models:
                gauge.add_metric([model.model_name], int(getattr(model, attr)))
            yield gauge
        if s.mlx_memory is not None:
            for name, value, doc in (
                ("mlx_active_memory_bytes", s.mlx_memory[0], "Bytes MLX arrays hold now."),
                ("mlx_cache_memory_bytes", s.mlx_memory[1], "Bytes MLX keeps cached for reuse."),
            ):
                gauge = GaugeMetricFamily(f"{p}{name}", doc)
                gauge.add_metric([], value)
                yield gauge
        yield from _memory_gauges(s)
        jobs = GaugeMetricFamily(
            f"{p}background_jobs", "Active background responses by state.", labels=("state",)
        )
        for state, count in s.jobs.items():
            jobs.add_metric([state], count)
        yield jobs
        entries = GaugeMetricFamily(f"{p}store_entries", "Entries held.", labels=("store",))
        held = GaugeMetricFamily(f"{p}store_bytes", "Approximate bytes held.", labels=("store",))
        evicted = CounterMetricFamily(
            f"{p}store_evictions", "Entries evicted (LRU or budget).", labels=("store",)
        )
        for store, (n, nbytes, evictions) in s.stores.items():
            entries.add_metric([store], n)
            held.add_metric([store], nbytes)
            evicted.add_metric([store], evictions)
        yield from (entries, held, evicted)


def _memory_gauges(s: Snapshot) -> Iterator[Metric]:
    """The memory budget's view: bytes by model and kind, the runtime's, and the limit."""
    held = GaugeMetricFamily(
        f"{PREFIX}memory_bytes",
        "Memory held, by model and kind: weights, kv (live sequences, reserved), prompt_cache, "
        "image_cache (a vision model's image encodings); "
        'the process\'s runtime under model_name "".',
        labels=(*MODEL, "kind"),
    )
    for model, kinds in s.memory.items():
        for kind, n_bytes in kinds.items():
            held.add_metric([model, kind], n_bytes)
    held.add_metric(["", "runtime"], s.runtime_bytes)
    yield held
    if s.memory_limit is not None:
        limit = GaugeMetricFamily(
            f"{PREFIX}memory_limit_bytes", "The process's memory budget (--memory-limit)."
        )
        limit.add_metric([], s.memory_limit)
        yield limit


class CoreMetrics:
    """The core's own registry (one per Core, so several cores can share a process).

    `snapshot` reads the core's state on the event loop just before each scrape renders.
    """

    def __init__(self, snapshot: Callable[[], Awaitable[Snapshot]]) -> None:
        self._snapshot = snapshot
        self.registry = CollectorRegistry()
        self.engine = EngineMetrics(self.registry)
        self._loads = Counter(
            f"{PREFIX}model_loads",
            "Times a model was loaded, by reason (startup, request, explicit).",
            (*MODEL, "reason"),
            registry=self.registry,
        )
        self._load_seconds = Histogram(
            f"{PREFIX}model_load_seconds",
            "Time a model took to load (weights read, engine started).",
            MODEL,
            buckets=LOAD_BUCKETS,
            registry=self.registry,
        )
        self._unloads = Counter(
            f"{PREFIX}model_unloads",
            "Times a model was unloaded, by reason (keep_alive: idle past it; lru: for another "
            "under --max-loaded-models; explicit: asked to).",
            (*MODEL, "reason"),
            registry=self.registry,
        )
        self._state = _StateCollector()
        self.registry.register(self._state)

    def model_loaded(self, model_name: str, reason: str, seconds: float) -> None:
        self._loads.labels(model_name, reason).inc()
        self._load_seconds.labels(model_name).observe(seconds)

    def model_unloaded(self, model_name: str, reason: str) -> None:
        self._unloads.labels(model_name, reason).inc()

    async def render(self) -> bytes:
        """The Prometheus text exposition, with state gauges read now."""
        self._state.snapshot = await self._snapshot()
        return generate_latest(self.registry)


def mlx_memory() -> tuple[int, int]:
    import mlx.core as mx  # the core has it loaded by now; the façade never gets here

    return mx.get_active_memory(), mx.get_cache_memory()
