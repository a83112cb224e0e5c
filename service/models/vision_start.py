"""Starts a vision-language model: its VisionWorker, its runtime, its cache metrics."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from mlx_responses.service.config import ConfigError, Settings
from mlx_responses.service.metrics import CoreMetrics
from mlx_responses.service.models.vision_metrics import watch_image_cache
from mlx_responses.service.models.vision_runtime import VisionRuntime
from mlx_responses.service.text.media import MediaLimits

log = logging.getLogger(__name__)


async def start_vision(
    model_id: str, folder: Path, settings: Settings, metrics: CoreMetrics
) -> VisionRuntime:
    """Loads the VLM on its own engine thread (mlx-vlm: the [vision] extra)."""
    try:
        import mlx_vlm  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"--model {folder} is a vision-language model: install mlx-responses[vision] "
            "(mlx-vlm) to serve it"
        ) from exc
    from mlx_responses.service.engine.vision_worker import VisionWorker
    from mlx_responses.service.models.vision_runtime import load_vision_model

    started = time.perf_counter()
    worker = VisionWorker(
        lambda: load_vision_model(folder, model_id),
        name=f"mlx-vision-{model_id}",
        max_queued_requests=settings.max_queued_requests,
        encoding_cache_entries=settings.image_encoding_cache_entries,
    )
    loaded = await worker.start()
    watch_image_cache(metrics, model_id, worker.cache_stats)
    log.info(
        "vision model %s loaded in %.2fs (mlx-vlm; one request at a time)",
        model_id,
        time.perf_counter() - started,
    )
    limits = MediaLimits(settings.max_media_bytes, settings.max_image_pixels)
    return VisionRuntime(loaded, worker, limits)
