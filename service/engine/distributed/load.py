"""A rank's shard of a model, loaded through mlx-lm's `sharded_load`, and the group it serves in.

`tensor`: every layer split across the ranks (the model's `shard()`; each rank computes every
token, the ranks sum their halves after attention and MLP). `pipeline`: the layers split into
consecutive runs, one per rank (the model's `model.pipeline()`; mlx-lm needs the checkpoint's
`model.safetensors.index.json` to pick each rank's files). `auto`: tensor where the model can.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.mlx_lm_compat import load_architecture, sharded_load
from mlx_responses.service.engine.model import LoadedModel, context_length_of, sampling_defaults
from mlx_responses.service.engine.sliding_window import apply_window

log = logging.getLogger(__name__)

MODES = ("tensor", "pipeline")


@functools.cache
def join_group() -> Any | None:
    """The group this process was launched into (mlx.launch, mpirun), or None when alone."""
    if not mx.distributed.is_available():
        return None
    group = mx.distributed.init()
    return group if group.size() > 1 else None


def release_stdin() -> None:
    """A rank reads nothing from its stdin: it closes it (/dev/null in its place). mlx.launch
    relays its own stdin to every rank in a thread that polls the rank's stdin pipe for writing
    without blocking (a core busy); once a write fails (the rank closed its end) it stops
    polling it, so the relay idles from the first byte it relays (docs/guides/distributed.md)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)


def shard_modes(folder: Path) -> tuple[str, ...]:
    """The ways mlx-lm can split the model in `folder`, tensor first (its class, built lazily:
    no weight is read)."""
    model, _ = load_architecture(folder, lazy=True, strict=False)
    modes = []
    if hasattr(model, "shard"):
        modes.append("tensor")
    if hasattr(model, "model") and hasattr(model.model, "pipeline"):
        modes.append("pipeline")
    del model
    return tuple(modes)


def resolve_mode(requested: str, folder: Path) -> str:
    """`--distributed` for the model in `folder`: `auto` is tensor where the model has `shard()`,
    else pipeline; a mode the model lacks is a ConfigError."""
    modes = shard_modes(folder)
    if requested == "auto":
        if not modes:
            raise ConfigError(
                f"{folder.name} cannot be served by several processes: its mlx-lm model has "
                "neither shard() (tensor parallel) nor model.pipeline() (pipeline parallel)"
            )
        return modes[0]
    if requested not in modes:
        offered = ", ".join(modes) or "none"
        raise ConfigError(
            f"--distributed {requested}: {folder.name}'s mlx-lm model does not support it "
            f"(supported: {offered})"
        )
    if requested == "pipeline" and not (folder / "model.safetensors.index.json").is_file():
        raise ConfigError(
            "--distributed pipeline needs model.safetensors.index.json in the model folder "
            "(mlx-lm's sharded_load picks each rank's files by it; mlx_lm.convert writes one)"
        )
    return requested


def load_shard(folder: Path, alias: str, mode: str, group: Any) -> LoadedModel:
    """This rank's shard of the model in `folder` (`mode`: tensor or pipeline), loaded with
    mlx-lm's sharded_load; returns once every rank has loaded its own (it ends on a barrier)."""
    started = time.perf_counter()
    model, tokenizer, config = sharded_load(
        str(folder),
        pipeline_group=group if mode == "pipeline" else None,
        tensor_group=group if mode == "tensor" else None,
        return_config=True,
    )
    raw = json.loads((folder / "config.json").read_text())
    apply_window(model, raw, alias)
    temperature, top_p = sampling_defaults(folder)
    loaded = LoadedModel(
        model=model,
        tokenizer=tokenizer,
        path=folder,
        alias=alias,
        context_length=context_length_of(raw),
        created=int(time.time()),
        vocab_size=int(
            raw.get("vocab_size")
            or (raw.get("text_config") or {}).get("vocab_size")
            or config.get("vocab_size")
            or len(tokenizer)
        ),
        default_temperature=temperature,
        default_top_p=top_p,
    )
    log.info(
        "rank %d of %d: loaded the %s shard of %s in %.2fs",
        group.rank(),
        group.size(),
        mode,
        alias,
        time.perf_counter() - started,
    )
    return loaded
