"""/metrics collectors of per-model counters read at each scrape (the prompt cache's disk tier,
`disk_metrics.py`; the image-encoding cache, `vision_metrics.py`): one collector a kind and
registry, holding each loaded model's counters by name (a reload replaces the old ones)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from mlx_responses.service.metrics import CoreMetrics
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

# A kind's metric families, made from the models' counters (name, counters) at a scrape.
Families = Callable[[Sequence[tuple[str, Any]]], Iterable[Metric]]


class _PerModel(Collector):
    def __init__(self, families: Families) -> None:
        self.families = families
        self.models: dict[str, Any] = {}

    def collect(self) -> Iterator[Metric]:
        yield from self.families(list(self.models.items()))


_collectors: weakref.WeakKeyDictionary[object, dict[Families, _PerModel]] = (
    weakref.WeakKeyDictionary()
)


def watch(metrics: CoreMetrics, families: Families, model_name: str, counters: object) -> None:
    """Reports `counters` as `model_name`'s through `families` (their collector made and
    registered on the core's registry once)."""
    kinds = _collectors.setdefault(metrics.registry, {})
    collector = kinds.get(families)
    if collector is None:
        collector = kinds[families] = _PerModel(families)
        metrics.registry.register(collector)
    collector.models[model_name] = counters
