"""/metrics for vision models' image-encoding caches: hits, misses, time in the vision tower,
entries and bytes held."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from mlx_responses.service.metrics import PREFIX, CoreMetrics
from mlx_responses.service.models.per_model_metrics import watch
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class CacheCounters(Protocol):
    hits: int
    misses: int
    encode_seconds: float
    entries: int
    bytes: int


def _families(models: Sequence[tuple[str, CacheCounters]]) -> Iterator[Metric]:
    p = PREFIX
    hits = CounterMetricFamily(
        f"{p}image_encoding_cache_hits",
        "Images whose encoding came from the cache (the vision tower skipped).",
        labels=("model_name",),
    )
    misses = CounterMetricFamily(
        f"{p}image_encoding_cache_misses",
        "Images run through the vision tower.",
        labels=("model_name",),
    )
    seconds = CounterMetricFamily(
        f"{p}image_encoding_seconds",
        "Seconds spent in the vision tower (misses); a hit saves about seconds/misses.",
        labels=("model_name",),
    )
    entries = GaugeMetricFamily(
        f"{p}image_encoding_cache_entries", "Image encodings held.", labels=("model_name",)
    )
    held = GaugeMetricFamily(
        f"{p}image_encoding_cache_bytes",
        "Bytes the image encodings hold (--image-encoding-cache-bytes).",
        labels=("model_name",),
    )
    for name, stats in models:
        hits.add_metric([name], stats.hits)
        misses.add_metric([name], stats.misses)
        seconds.add_metric([name], stats.encode_seconds)
        entries.add_metric([name], stats.entries)
        held.add_metric([name], stats.bytes)
    yield from (hits, misses, seconds, entries, held)


def watch_image_cache(metrics: CoreMetrics, model_name: str, stats: CacheCounters) -> None:
    """Reports `stats` as the model's image-cache metrics (a reload replaces the old ones)."""
    watch(metrics, _families, model_name, stats)
