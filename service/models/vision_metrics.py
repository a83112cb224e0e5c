"""/metrics for vision models' image-encoding caches: hits, misses, time in the vision tower,
entries and bytes held."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Protocol

from mlx_responses.service.metrics import PREFIX, CoreMetrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class CacheCounters(Protocol):
    hits: int
    misses: int
    encode_seconds: float
    entries: int
    bytes: int


class _ImageCacheCollector(Collector):
    def __init__(self) -> None:
        self.models: dict[str, CacheCounters] = {}

    def collect(self) -> Iterator[Metric]:
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
        for name, stats in list(self.models.items()):
            hits.add_metric([name], stats.hits)
            misses.add_metric([name], stats.misses)
            seconds.add_metric([name], stats.encode_seconds)
            entries.add_metric([name], stats.entries)
            held.add_metric([name], stats.bytes)
        yield from (hits, misses, seconds, entries, held)


_collectors: weakref.WeakKeyDictionary[object, _ImageCacheCollector] = weakref.WeakKeyDictionary()


def watch_image_cache(metrics: CoreMetrics, model_name: str, stats: CacheCounters) -> None:
    """Reports `stats` as the model's image-cache metrics (a reload replaces the old ones)."""
    collector = _collectors.get(metrics.registry)
    if collector is None:
        collector = _collectors[metrics.registry] = _ImageCacheCollector()
        metrics.registry.register(collector)
    collector.models[model_name] = stats
