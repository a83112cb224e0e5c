"""Frozen settings of the core, read once from flags and environment variables.

The flags themselves (names, defaults, variables, help) are declared once in service/flags.py.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from mlx_responses.service import flags as F
from mlx_responses.service.flags import STORE_FLAGS, EnvValueError, api_keys_from

__all__ = ["BUNDLED_MODEL", "STORE_FLAGS", "ConfigError", "Settings", "api_keys_from"]

BUNDLED_MODEL = Path(__file__).resolve().parent / "assets" / "tiny-chat"

HOSTED_TOOLS_MODES: tuple[str, ...] = F.HOSTED_TOOLS.choices or ()
MEDIA_MODES: tuple[str, ...] = F.MEDIA.choices or ()
STORE_SCHEMES = ("redis://", "rediss://", "unix://")
SPECULATIVE_MODES: tuple[str, ...] = F.SPECULATIVE.choices or ()
KV_BITS: tuple[int, ...] = F.KV_BITS.choices or ()
ENGINES: tuple[str, ...] = F.ENGINE.choices or ()


class ConfigError(ValueError):
    """A setting that cannot start the server."""


@dataclass(frozen=True)
class Settings:
    """Everything the core needs to start, fixed at startup and passed down."""

    # Every `--model`, in order; the first loads at startup, the others on first use.
    models: tuple[Path, ...] = (BUNDLED_MODEL,)
    model_aliases: tuple[str, ...] = ()  # the i-th names the i-th model
    max_loaded_models: int | None = F.MAX_LOADED_MODELS.default  # None: no limit
    # Folders whose every model folder is served too (on first use, as --model's others).
    model_dirs: tuple[Path, ...] = ()
    # Seconds a model stays loaded once idle (a request's `keep_alive` overrides it);
    # negative: for good.
    keep_alive: float = F.KEEP_ALIVE.default
    pins: tuple[str, ...] = ()  # models loaded at startup and never unloaded by the pool
    grpc_host: str = F.GRPC_HOST.default
    grpc_port: int = F.GRPC_PORT.default
    responses_store_max_entries: int = F.RESPONSES_STORE_MAX_ENTRIES.default
    responses_store_max_bytes: int = F.RESPONSES_STORE_MAX_BYTES.default
    responses_store_ttl_secs: int = F.RESPONSES_STORE_TTL_SECS.default
    responses_background_max_jobs: int = F.RESPONSES_BACKGROUND_MAX_JOBS.default
    responses_background_ephemeral_ttl_secs: int = F.RESPONSES_BACKGROUND_EPHEMERAL_TTL_SECS.default
    conversation_store_max_entries: int = F.CONVERSATION_STORE_MAX_ENTRIES.default
    conversation_store_max_bytes: int = F.CONVERSATION_STORE_MAX_BYTES.default
    conversation_store_ttl_secs: int = F.CONVERSATION_STORE_TTL_SECS.default
    reasoning_echo_max_bytes: int = F.REASONING_ECHO_MAX_BYTES.default
    max_batch_size: int = F.MAX_BATCH_SIZE.default
    max_queued_requests: int = F.MAX_QUEUED_REQUESTS.default
    # --memory-limit: bytes, or a fraction (< 1) of the device's memory; None: the device's
    # default (service/engine/memory/device.py resolves both).
    memory_limit: float | None = F.MEMORY_LIMIT.default
    prompt_cache_max_entries: int = F.PROMPT_CACHE_MAX_ENTRIES.default
    prompt_cache_max_bytes: int = F.PROMPT_CACHE_MAX_BYTES.default
    prompt_checkpoint_tokens: int = F.PROMPT_CHECKPOINT_TOKENS.default  # 0: none
    # The prompt cache's disk tier: None, none (the command line fills in the user's cache
    # folder unless --no-prompt-cache-disk; settings built in code have none unless given).
    prompt_cache_dir: Path | None = F.PROMPT_CACHE_DIR.default
    prompt_cache_disk_bytes: int = F.PROMPT_CACHE_DISK_BYTES.default
    no_prompt_cache_disk: bool = F.NO_PROMPT_CACHE_DISK.default
    default_max_output_tokens: int = F.DEFAULT_MAX_OUTPUT_TOKENS.default
    max_prompt_tokens: int = F.MAX_PROMPT_TOKENS.default  # 0: the context window only
    blas: str = F.BLAS.default
    speculative: str = F.SPECULATIVE.default
    num_draft_tokens: int = F.NUM_DRAFT_TOKENS.default
    no_mtp: bool = F.NO_MTP.default
    draft_model: Path | None = F.DRAFT_MODEL.default
    kv_bits: int | None = F.KV_BITS.default
    # None: the device's default (flags.prefill_for_device, resolved by the engine)
    max_prefill_tokens_per_step: int | None = F.MAX_PREFILL_TOKENS_PER_STEP.default
    prefill_batch_size: int | None = F.PREFILL_BATCH_SIZE.default
    engine: str = F.ENGINE.default
    stream_window_ms: float = F.STREAM_WINDOW_MS.default
    batch_wait_ms: float = F.BATCH_WAIT_MS.default
    # Under mlx.launch: how the ranks split the model, and when a silent group counts as lost.
    distributed: str = F.DISTRIBUTED.default
    distributed_timeout: float = F.DISTRIBUTED_TIMEOUT.default
    store_url: str = F.STORE_URL.default
    # Never in a repr (settings may be logged): keys are secrets.
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    grpc_tls_cert: Path | None = F.GRPC_TLS_CERT.default
    grpc_tls_key: Path | None = F.GRPC_TLS_KEY.default
    shutdown_grace_secs: float = F.SHUTDOWN_GRACE_SECS.default
    metrics_port: int | None = F.METRICS_PORT.default
    allow_download: bool = F.ALLOW_DOWNLOAD.default
    hosted_tools: str = F.HOSTED_TOOLS.default
    # A request's `chat_template_kwargs.chat_template` replaces the model's template.
    allow_client_chat_template: bool = F.ALLOW_CLIENT_CHAT_TEMPLATE.default
    # Each response, job and conversation belongs to the API key that made it.
    isolate_keys: bool = F.ISOLATE_KEYS.default
    # Vision-language models (service/models/vision_runtime.py)
    max_media_bytes: int = F.MAX_MEDIA_BYTES.default
    max_image_pixels: int = F.MAX_IMAGE_PIXELS.default
    image_encoding_cache_entries: int = F.IMAGE_ENCODING_CACHE_ENTRIES.default
    image_encoding_cache_bytes: int = F.IMAGE_ENCODING_CACHE_BYTES.default
    allow_remote_media: bool = F.ALLOW_REMOTE_MEDIA.default
    remote_media_timeout_secs: float = F.REMOTE_MEDIA_TIMEOUT_SECS.default
    media: str = F.MEDIA.default

    def __post_init__(self) -> None:
        if not self.models and not self.model_dirs:
            raise ConfigError("at least one --model or --model-dir is needed")
        if len(self.model_aliases) > len(self.models):
            raise ConfigError("more --model-alias than --model flags (the i-th names the i-th)")
        if any(not alias for alias in self.model_aliases):
            raise ConfigError("a --model-alias must not be empty")
        if self.max_loaded_models is not None and self.max_loaded_models < 1:
            raise ConfigError("--max-loaded-models must be at least 1")
        if self.max_loaded_models is not None and len(set(self.pins)) > self.max_loaded_models:
            raise ConfigError("more --pin models than --max-loaded-models lets stay loaded")
        if math.isnan(self.keep_alive):
            raise ConfigError("--keep-alive must be a number of seconds or a duration")
        for spec in STORE_FLAGS:
            if getattr(self, spec.field) < 0:
                raise ConfigError(f"{spec.flag} must be >= 0")
        if self.responses_background_ephemeral_ttl_secs < 1:
            raise ConfigError("--responses-background-ephemeral-ttl-secs must be at least 1")
        if self.max_batch_size < 1:
            raise ConfigError("--max-batch-size must be at least 1")
        if self.max_queued_requests < 0:
            raise ConfigError("--max-queued-requests must be >= 0")
        if self.memory_limit is not None and self.memory_limit <= 0:
            raise ConfigError("--memory-limit must be positive: bytes, or a fraction below 1")
        if self.prompt_cache_disk_bytes < 0:
            raise ConfigError("--prompt-cache-disk-bytes must be >= 0")
        if self.max_prompt_tokens < 0:
            raise ConfigError("--max-prompt-tokens must be >= 0")
        if self.speculative not in SPECULATIVE_MODES:
            raise ConfigError(f"--speculative must be one of {', '.join(SPECULATIVE_MODES)}")
        if (self.speculative == "draft") != (self.draft_model is not None):
            raise ConfigError("--speculative draft and --draft-model PATH go together")
        if self.num_draft_tokens < 1:
            raise ConfigError("--num-draft-tokens must be at least 1")
        if self.max_prefill_tokens_per_step is not None and self.max_prefill_tokens_per_step < 1:
            raise ConfigError("--max-prefill-tokens-per-step must be at least 1")
        if self.prefill_batch_size is not None and self.prefill_batch_size < 1:
            raise ConfigError("--prefill-batch-size must be at least 1")
        if self.kv_bits not in (None, *KV_BITS):
            raise ConfigError("--kv-bits must be 4 or 8")
        if self.engine not in ENGINES:
            raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}")
        if not 0 <= self.stream_window_ms <= 1000:
            raise ConfigError("--stream-window-ms must be between 0 and 1000")
        if not 0 <= self.batch_wait_ms <= 1000:
            raise ConfigError("--batch-wait-ms must be between 0 and 1000")
        if not 0 < self.distributed_timeout <= 3600:
            raise ConfigError("--distributed-timeout must be in (0, 3600]")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigError("--metrics-port must be between 0 and 65535")
        if self.reasoning_echo_max_bytes < 0:
            raise ConfigError(f"{F.REASONING_ECHO_MAX_BYTES.env} must be >= 0")
        if self.store_url != "memory" and not self.store_url.startswith(STORE_SCHEMES):
            raise ConfigError("--store must be 'memory' or a redis://host:port/db URL")
        if (self.grpc_tls_cert is None) != (self.grpc_tls_key is None):
            raise ConfigError("--grpc-tls-cert and --grpc-tls-key go together")
        if any(not key for key in self.api_keys):
            raise ConfigError("an API key must not be empty")
        if self.isolate_keys and not self.api_keys:
            raise ConfigError("--isolate-keys needs --api-key: responses belong to keys")
        if not 0 <= self.shutdown_grace_secs <= 3600:
            raise ConfigError("--shutdown-grace-secs must be between 0 and 3600")
        if self.hosted_tools not in HOSTED_TOOLS_MODES:
            raise ConfigError(f"--hosted-tools must be one of {', '.join(HOSTED_TOOLS_MODES)}")
        if self.max_media_bytes < 1:
            raise ConfigError("--max-media-bytes must be at least 1")
        if self.max_image_pixels < 1:
            raise ConfigError("--max-image-pixels must be at least 1")
        if self.image_encoding_cache_entries < 0:
            raise ConfigError("--image-encoding-cache-entries must be >= 0")
        if self.image_encoding_cache_bytes < 0:
            raise ConfigError("--image-encoding-cache-bytes must be >= 0")
        if self.prompt_checkpoint_tokens < 0:
            raise ConfigError("--prompt-checkpoint-tokens must be >= 0")
        if not 0 < self.remote_media_timeout_secs <= 600:
            raise ConfigError("--remote-media-timeout-secs must be in (0, 600]")
        if self.media not in MEDIA_MODES:
            raise ConfigError(f"--media must be one of {', '.join(MEDIA_MODES)}")


def add_core_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """Adds the flags of `core` (service/flags.py); variables the seed names give their defaults."""
    try:
        F.add_arguments(parser, F.CORE, env)
    except EnvValueError as exc:
        raise ConfigError(str(exc)) from exc


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """Builds the frozen settings from parsed flags and the environment."""
    values = {f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)}
    # The bundled model serves when neither --model nor --model-dir names one.
    values["model_dirs"] = tuple(args.model_dirs or ())
    values["models"] = tuple(args.models or (() if values["model_dirs"] else (BUNDLED_MODEL,)))
    values["model_aliases"] = tuple(args.model_aliases or ())
    values["pins"] = tuple(args.pins or ())
    try:
        for spec in (F.REASONING_ECHO_MAX_BYTES, F.BLAS):  # variables without a flag
            values[spec.field] = F.env_value(spec, env)
    except EnvValueError as exc:
        raise ConfigError(str(exc)) from exc
    values["api_keys"] = api_keys_from(args.api_keys, env)
    if values.get("prompt_cache_dir") is None and not values.get("no_prompt_cache_disk"):
        values["prompt_cache_dir"] = F.default_prompt_cache_dir(env)
    return Settings(**values)


def read_environment() -> Mapping[str, str]:
    """The only place that reads the process environment."""
    return dict(os.environ)
