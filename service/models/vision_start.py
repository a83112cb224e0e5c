"""Starts a vision-language model: what its engine loads, its runtime, its cache metrics."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mlx_responses.service.config import ConfigError, Settings
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.metrics import CoreMetrics
from mlx_responses.service.models.vision_metrics import watch_image_cache
from mlx_responses.service.models.vision_runtime import VisionRuntime
from mlx_responses.service.text.media import MediaLimits


def vision_loader(model_id: str, folder: Path) -> Callable[[], LoadedModel]:
    """What the engine thread loads for a VLM folder (mlx-vlm: the [vision] extra)."""
    try:
        import mlx_vlm  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"--model {folder} is a vision-language model: install mlx-responses[vision] "
            "(mlx-vlm) to serve it"
        ) from exc
    from mlx_responses.service.models.vision_runtime import load_vision_model

    return lambda: load_vision_model(folder, model_id)


def vision_runtime(
    model_id: str,
    loaded: LoadedModel,
    worker: EngineWorker,
    settings: Settings,
    metrics: CoreMetrics,
) -> VisionRuntime:
    """The started VLM's runtime; its image-encoding cache reports to /metrics."""
    watch_image_cache(metrics, model_id, worker.encoder.stats)
    limits = MediaLimits(settings.max_media_bytes, settings.max_image_pixels)
    return VisionRuntime(loaded, worker, limits)
