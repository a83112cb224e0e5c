"""A core served by a distributed group (mlx.launch): its rules, its load, and the other ranks.

Every rank runs the same command line. Rank 0 is the core (and the façade with `serve`): its
one model's engine leads (service/engine/distributed/lockstep.py). The other ranks start the
same engine, fed by rank 0 instead of requests (`run_follower`), and exit when it stops or the
group is lost (mlx.launch then stops the others).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from mlx_responses.service.config import ConfigError
from mlx_responses.service.models.source import resolve_model
from mlx_responses.service.models.vision_config import vision_folder

if TYPE_CHECKING:
    from mlx_responses.service.config import Settings
    from mlx_responses.service.engine.distributed.lockstep import Follower, Leader
    from mlx_responses.service.engine.model import LoadedModel
    from mlx_responses.service.engine.worker import EngineWorker

log = logging.getLogger(__name__)

# The settings every rank's engine must share: they decide what each step computes.
ENGINE_SETTINGS = (
    "engine",
    "max_batch_size",
    "max_queued_requests",
    "max_prefill_tokens_per_step",
    "prefill_batch_size",
    "prompt_cache_max_entries",
    "prompt_cache_max_bytes",
    "prompt_checkpoint_tokens",
    "speculative",
    "num_draft_tokens",
    "no_mtp",
    "kv_bits",
    "batch_wait_ms",
    "distributed",
)


def check_group_settings(settings: Settings) -> None:
    """What a group cannot serve, refused at startup (ConfigError): several models (the ranks
    would have to load and unload them together), a draft model, a vision model."""
    if len(settings.models) != 1:
        raise ConfigError("a distributed group serves one --model")
    if settings.draft_model is not None:
        raise ConfigError("--speculative draft is not supported in a distributed group")
    folder = resolve_model(settings.models[0], settings.allow_download).folder
    if vision_folder(folder):
        raise ConfigError("vision models are not supported in a distributed group")


def group_settings(settings: Settings) -> Settings:
    """The settings of a rank in a group: checked (`check_group_settings`), with `distributed`
    resolved to the mode the model supports (tensor or pipeline)."""
    from mlx_responses.service.engine.distributed.load import resolve_mode

    check_group_settings(settings)
    folder = resolve_model(settings.models[0], settings.allow_download).folder
    return replace(settings, distributed=resolve_mode(settings.distributed, folder))


def engine_settings(settings: Settings) -> dict[str, Any]:
    """The engine settings the ranks compare at the handshake (JSON values)."""
    values = asdict(settings)
    return {name: values[name] for name in ENGINE_SETTINGS}


class ShardLoad:
    """The engine thread's load in a group: this rank's shard, then the handshake (a seed for
    the random state, the engine settings compared), then the link's watchdog."""

    def __init__(
        self, settings: Settings, model_id: str, link: Leader | Follower, group: Any
    ) -> None:
        self.settings = settings
        self.model_id = model_id
        self.link = link
        self.group = group

    def __call__(self) -> LoadedModel:
        from mlx_responses.service.engine.distributed.load import load_shard

        folder = resolve_model(self.settings.models[0], self.settings.allow_download).folder
        loaded = load_shard(folder, self.model_id, self.settings.distributed, self.group)
        self.link.handshake(engine_settings(self.settings))
        self.link.start()
        return loaded


def group_prompt_cache(settings: Settings) -> tuple[int, bool]:
    """The prompt cache's entries and whether its disk tier may run, in a group.

    The disk tier never does: its reads and its background writer are timed by the disk, and a
    hit on one rank only would prefill different tokens there. The memory tier evicts by
    bytes: with tensor parallelism every rank's entries are the same size, so every rank keeps
    and evicts the same ones; pipeline ranks hold different layers (different sizes), so there
    the cache is off.
    """
    if settings.distributed == "pipeline":
        return 0, False
    return settings.prompt_cache_max_entries, False


async def run_follower(
    settings: Settings,
    group: Any,
    build: Callable[..., EngineWorker],
    stop: asyncio.Event,
) -> int:
    """Another rank (`settings` from `group_settings`): loads its shard and steps whatever rank
    0 sends until rank 0 stops it (exit 0), the group is lost (exit 1) or `stop` is set (a
    signal: exit 0)."""
    from mlx_responses.service.engine.distributed.channel import Channel
    from mlx_responses.service.engine.distributed.lockstep import Follower
    from mlx_responses.service.models.processors import build_processors
    from mlx_responses.service.models.source import served_ids
    from mlx_responses.service.text.grammars import GrammarFactory

    source = resolve_model(settings.models[0], settings.allow_download)
    (model_id,) = served_ids([source], settings.model_aliases)
    grammars: list[GrammarFactory] = []

    def rebuild(specs: list[list[Any]]) -> list[Any]:  # on the engine thread, once loaded
        loaded = worker.loaded
        if not grammars:
            grammars.append(GrammarFactory(loaded.tokenizer._tokenizer, loaded.vocab_size))
        return build_processors(specs, loaded, grammars[0])

    link = Follower(Channel(group), settings.distributed_timeout, rebuild)
    lost = asyncio.Event()
    loop = asyncio.get_running_loop()
    link.listen(lambda reason: loop.call_soon_threadsafe(lost.set))
    worker = build(settings, model_id, ShardLoad(settings, model_id, link, group), link)
    link.attach(worker)
    await worker.start()
    log.info("rank %d of %d: following rank 0", group.rank(), group.size())
    stopped = asyncio.create_task(asyncio.to_thread(worker._stopped.wait))
    ends = {stopped, asyncio.create_task(lost.wait()), asyncio.create_task(stop.wait())}
    await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
    for task in ends:
        task.cancel()
    if link.broken is not None:
        log.error("rank %d: leaving the group: %s", group.rank(), link.broken)
        return 1
    if stop.is_set():
        log.info("rank %d: stopped by a signal", group.rank())
    else:
        log.info("rank %d: rank 0 stopped the engine", group.rank())
    return 0
