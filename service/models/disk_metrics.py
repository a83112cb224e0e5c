"""/metrics for the prompt cache's disk tier: what it dropped as unreadable, the writes that
failed or were skipped (the writer behind), and whether it is degraded (a full disk, a
read-only folder, an index it could not open)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from mlx_responses.service.metrics import PREFIX, CoreMetrics
from mlx_responses.service.models.per_model_metrics import watch
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class DiskCounters(Protocol):
    """engine/requests.py's DiskHealth, as read here."""

    dropped: dict[str, int]
    write_errors: int
    skipped: int
    degraded: str | None


def _families(models: Sequence[tuple[str, DiskCounters]]) -> Iterator[Metric]:
    dropped = CounterMetricFamily(
        f"{PREFIX}prompt_disk_dropped",
        "Disk-tier rows and files dropped as unreadable, by kind (row: an index row, file: "
        "an entry file, junk: something under entries/ that is no entry).",
        labels=("model_name", "kind"),
    )
    errors = CounterMetricFamily(
        f"{PREFIX}prompt_disk_write_errors",
        "Disk-tier writes, touches and deletes that failed.",
        labels=("model_name",),
    )
    skipped = CounterMetricFamily(
        f"{PREFIX}prompt_disk_writes_skipped",
        "Disk-tier entries not written because the writer was behind (its queue full).",
        labels=("model_name",),
    )
    degraded = GaugeMetricFamily(
        f"{PREFIX}prompt_disk_degraded",
        "1 while the disk tier is degraded, by reason (disk_full, read_only: writes "
        "paused, reads go on; unavailable: the tier is off).",
        labels=("model_name", "reason"),
    )
    for name, health in models:
        for kind, count in sorted(health.dropped.items()):
            dropped.add_metric([name, kind], count)
        errors.add_metric([name], health.write_errors)
        skipped.add_metric([name], health.skipped)
        if health.degraded is not None:
            degraded.add_metric([name, health.degraded], 1)
    yield from (dropped, errors, skipped, degraded)


def watch_prompt_disk(metrics: CoreMetrics, model_name: str, health: DiskCounters) -> None:
    """Reports `health` as the model's disk-tier metrics (a reload replaces the old ones)."""
    watch(metrics, _families, model_name, health)
