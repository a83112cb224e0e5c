"""Loads a local mlx-lm model folder and describes it."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx import nn
from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.architectures import why_unservable
from mlx_responses.service.engine.mlx_lm_compat import (
    KVCache,
    TokenizerWrapper,
    load,
    load_architecture,
    load_tokenizer,
    make_prompt_cache,
)
from mlx_responses.service.engine.model_fixes import fix_model, loading_classes
from mlx_responses.service.engine.sliding_window import apply_window

log = logging.getLogger(__name__)

DEFAULT_CONTEXT = 4096


@dataclass(frozen=True)
class LoadedModel:
    """A model and its tokenizer, with the names clients may use for it."""

    model: nn.Module
    tokenizer: TokenizerWrapper
    path: Path
    alias: str
    context_length: int
    created: int
    vocab_size: int = 0
    default_temperature: float = 1.0
    default_top_p: float = 1.0
    processor: Any = None  # a vision model's (mlx-vlm's): it renders images into the prompt

    def accepts_name(self, name: str) -> bool:
        """Whether a request's `model` names this model (alias, folder name or path)."""
        # The resolved path last: it walks the file system, and most requests name the alias.
        return name in (self.alias, self.path.name, str(self.path)) or name == str(
            self.path.resolve()
        )


def plain_caches(model: nn.Module) -> bool:
    """Whether every layer of `model` keeps a plain, growing KV cache (not a rotating window,
    a recurrent state or a quantized one): what drafts, quantized KV and fixed slots need."""
    return all(isinstance(c, KVCache) for c in make_prompt_cache(model))


def _probe(model: nn.Module) -> None:
    """Two tokens through the model and its own caches: what fails on every request (a kernel
    this machine lacks: mlx-lm's bitnet and muse_spark are Metal-only) fails here instead."""
    cache = make_prompt_cache(model)
    logits = model(mx.array([[0, 1]]), cache=cache)
    mx.eval(logits)


def context_length_of(config: dict[str, Any]) -> int:
    """The context window a model config declares."""
    for key in (
        "max_position_embeddings",
        "max_sequence_length",
        "n_positions",
        "seq_length",
    ):
        value = config.get(key) or (config.get("text_config") or {}).get(key)
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_CONTEXT


def sampling_defaults(folder: Path) -> tuple[float, float]:
    """Temperature and top_p the model's generation_config.json declares (OpenAI's 1.0 else)."""
    path = folder / "generation_config.json"
    if not path.is_file():
        return 1.0, 1.0
    config = json.loads(path.read_text())
    if config.get("do_sample") is False:
        return 0.0, 1.0
    return float(config.get("temperature", 1.0)), float(config.get("top_p", 1.0))


class UnservableModelError(ConfigError):
    """A model this engine cannot serve, found when it loads: the message names its
    architecture and why (never accepted, then failed on its first request)."""


def load_model(path: Path, alias: str | None = None) -> LoadedModel:
    """Loads `path` (a local folder, never a hub id) with mlx_lm; raises UnservableModelError
    for a model it cannot serve (an architecture mlx-lm lacks or cannot load or run here)."""
    folder = path.expanduser().resolve()
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} is not an mlx-lm model folder (no config.json)")
    started = time.perf_counter()
    config = json.loads((folder / "config.json").read_text())
    architecture = config.get("model_type")
    try:
        if (classes := loading_classes(config)) is None:
            model, tokenizer = load(str(folder))[:2]
        else:
            model, _ = load_architecture(folder, get_model_classes=classes)
            tokenizer = load_tokenizer(folder, eos_token_ids=config.get("eos_token_id"))
    except SystemExit as exc:  # mlx-lm's olmo exits when its own package is missing
        raise UnservableModelError(
            f"{folder.name}: mlx-lm cannot load model type {architecture!r}: its module "
            f"exited ({exc.code}: a package it needs is missing)"
        ) from None
    except OSError:
        raise  # a file it cannot read: the folder may be still being copied in
    except Exception as exc:
        raise UnservableModelError(
            f"{folder.name}: mlx-lm cannot load model type {architecture!r}: {exc}"
        ) from exc
    fix_model(model)
    device = "cpu" if mx.default_device().type == mx.cpu else "gpu"
    try:
        if (why := why_unservable(model, device)) is not None:
            raise RuntimeError(why)
        _probe(model)
    except Exception as exc:
        raise UnservableModelError(
            f"{folder.name}: model type {architecture!r} cannot run on this machine: {exc}"
        ) from exc
    apply_window(model, config, alias or folder.name)
    temperature, top_p = sampling_defaults(folder)
    loaded = LoadedModel(
        model=model,
        tokenizer=tokenizer,
        path=folder,
        alias=alias or folder.name,
        context_length=context_length_of(config),
        created=int(time.time()),
        vocab_size=int(
            config.get("vocab_size")
            or (config.get("text_config") or {}).get("vocab_size")
            or len(tokenizer)
        ),
        default_temperature=temperature,
        default_top_p=top_p,
    )
    log.info(
        "loaded model %s from %s in %.2fs (context %d)",
        loaded.alias,
        folder,
        time.perf_counter() - started,
        loaded.context_length,
    )
    return loaded
