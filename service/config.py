"""Frozen settings of the core, read once from flags and environment variables."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

BUNDLED_MODEL = Path(__file__).resolve().parent / "assets" / "tiny-chat"


@dataclass(frozen=True)
class StoreFlag:
    """One store control of the seed: flag name, default and environment variable."""

    field: str
    flag: str
    default: int
    env: str
    help: str


# The seed's storage flags, exactly as it names them (flag, default, env var).
STORE_FLAGS: tuple[StoreFlag, ...] = (
    StoreFlag(
        "responses_store_max_entries",
        "--responses-store-max-entries",
        1024,
        "LLAMA_ARG_RESPONSES_STORE_MAX_ENTRIES",
        "stored responses kept (LRU); 0 disables response persistence",
    ),
    StoreFlag(
        "responses_store_max_bytes",
        "--responses-store-max-bytes",
        268435456,
        "MLXCEL_RESPONSES_STORE_MAX_BYTES",
        "approximate retained-byte budget of stored responses; 0 evicts at once",
    ),
    StoreFlag(
        "responses_store_ttl_secs",
        "--responses-store-ttl-secs",
        3600,
        "LLAMA_ARG_RESPONSES_STORE_TTL_SECS",
        "seconds a stored response lives after it is stored; 0 disables TTL",
    ),
    StoreFlag(
        "responses_background_max_jobs",
        "--responses-background-max-jobs",
        64,
        "MLXCEL_RESPONSES_BACKGROUND_MAX_JOBS",
        "cap on concurrently active background responses; 0 disables background mode",
    ),
    StoreFlag(
        "responses_background_ephemeral_ttl_secs",
        "--responses-background-ephemeral-ttl-secs",
        600,
        "MLXCEL_RESPONSES_BACKGROUND_EPHEMERAL_TTL_SECS",
        "seconds the final object of a store:false background response stays readable (>= 1)",
    ),
    StoreFlag(
        "conversation_store_max_entries",
        "--conversation-store-max-entries",
        256,
        "LLAMA_ARG_CONVERSATION_STORE_MAX_ENTRIES",
        "conversation transcripts kept (LRU); 0 disables conversations",
    ),
    StoreFlag(
        "conversation_store_max_bytes",
        "--conversation-store-max-bytes",
        67108864,
        "MLXCEL_CONVERSATION_STORE_MAX_BYTES",
        "approximate retained-byte budget of transcripts; 0 evicts at once",
    ),
    StoreFlag(
        "conversation_store_ttl_secs",
        "--conversation-store-ttl-secs",
        3600,
        "LLAMA_ARG_CONVERSATION_STORE_TTL_SECS",
        "seconds a transcript lives after its last update; 0 disables TTL",
    ),
)

REASONING_ECHO_ENV = "MLXCEL_REASONING_ECHO_MAX_BYTES"
API_KEY_ENV = "MLX_RESPONSES_API_KEY"
DEFAULT_SHUTDOWN_GRACE_SECS = 10.0
HOSTED_TOOLS_ENV = "MLXCEL_HOSTED_TOOLS"
HOSTED_TOOLS_MODES = ("reject", "drop")
BLAS_ENV = "MLX_RESPONSES_BLAS"
STORE_URL_ENV = "MLX_RESPONSES_STORE_URL"
STORE_SCHEMES = ("redis://", "rediss://", "unix://")


SPECULATIVE_MODES = ("off", "ngram", "draft")
KV_BITS = (4, 8)
ENGINES = ("batch", "slots")


class ConfigError(ValueError):
    """A setting that cannot start the server."""


@dataclass(frozen=True)
class Settings:
    """Everything the core needs to start, fixed at startup and passed down."""

    # Every `--model`, in order; the first loads at startup, the others on first use.
    models: tuple[Path, ...] = (BUNDLED_MODEL,)
    model_aliases: tuple[str, ...] = ()  # the i-th names the i-th model
    max_loaded_models: int | None = None  # None: every model may stay loaded
    grpc_host: str = "127.0.0.1"
    grpc_port: int = 50051
    responses_store_max_entries: int = 1024
    responses_store_max_bytes: int = 268435456
    responses_store_ttl_secs: int = 3600
    responses_background_max_jobs: int = 64
    responses_background_ephemeral_ttl_secs: int = 600
    conversation_store_max_entries: int = 256
    conversation_store_max_bytes: int = 67108864
    conversation_store_ttl_secs: int = 3600
    reasoning_echo_max_bytes: int = 16 * 1024 * 1024
    max_batch_size: int = 16
    max_queued_requests: int = 64
    prompt_cache_max_entries: int = 32
    prompt_cache_max_bytes: int = 1024 * 1024 * 1024
    default_max_output_tokens: int = 4096
    blas: str = "auto"
    speculative: str = "off"
    num_draft_tokens: int = 4
    draft_model: Path | None = None
    kv_bits: int | None = None
    max_prefill_tokens_per_step: int = 512
    stream_window_ms: float = 10.0
    engine: str = "batch"
    store_url: str = "memory"
    # Never in a repr (settings may be logged): keys are secrets.
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    grpc_tls_cert: Path | None = None
    grpc_tls_key: Path | None = None
    shutdown_grace_secs: float = DEFAULT_SHUTDOWN_GRACE_SECS
    metrics_port: int | None = None
    allow_download: bool = False
    hosted_tools: str = "reject"

    @property
    def model_path(self) -> Path:
        """The first `--model` (the one loaded at startup)."""
        return self.models[0]

    def __post_init__(self) -> None:
        if not self.models:
            raise ConfigError("at least one --model is needed")
        if len(self.model_aliases) > len(self.models):
            raise ConfigError("more --model-alias than --model flags (the i-th names the i-th)")
        if any(not alias for alias in self.model_aliases):
            raise ConfigError("a --model-alias must not be empty")
        if self.max_loaded_models is not None and self.max_loaded_models < 1:
            raise ConfigError("--max-loaded-models must be at least 1")
        for spec in STORE_FLAGS:
            if getattr(self, spec.field) < 0:
                raise ConfigError(f"{spec.flag} must be >= 0")
        if self.responses_background_ephemeral_ttl_secs < 1:
            raise ConfigError("--responses-background-ephemeral-ttl-secs must be at least 1")
        if self.max_batch_size < 1:
            raise ConfigError("--max-batch-size must be at least 1")
        if self.max_queued_requests < 0:
            raise ConfigError("--max-queued-requests must be >= 0")
        if self.speculative not in SPECULATIVE_MODES:
            raise ConfigError(f"--speculative must be one of {', '.join(SPECULATIVE_MODES)}")
        if (self.speculative == "draft") != (self.draft_model is not None):
            raise ConfigError("--speculative draft and --draft-model PATH go together")
        if self.num_draft_tokens < 1:
            raise ConfigError("--num-draft-tokens must be at least 1")
        if self.max_prefill_tokens_per_step < 1:
            raise ConfigError("--max-prefill-tokens-per-step must be at least 1")
        if self.engine not in ENGINES:
            raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}")
        if self.engine == "slots" and (self.speculative != "off" or self.kv_bits is not None):
            raise ConfigError("--engine slots does not do --speculative or --kv-bits yet")
        if not 0 <= self.stream_window_ms <= 1000:
            raise ConfigError("--stream-window-ms must be between 0 and 1000")
        if self.kv_bits not in (None, *KV_BITS):
            raise ConfigError("--kv-bits must be 4 or 8")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigError("--metrics-port must be between 0 and 65535")
        if self.reasoning_echo_max_bytes < 0:
            raise ConfigError(f"{REASONING_ECHO_ENV} must be >= 0")
        if self.store_url != "memory" and not self.store_url.startswith(STORE_SCHEMES):
            raise ConfigError("--store must be 'memory' or a redis://host:port/db URL")
        if (self.grpc_tls_cert is None) != (self.grpc_tls_key is None):
            raise ConfigError("--grpc-tls-cert and --grpc-tls-key go together")
        if any(not key for key in self.api_keys):
            raise ConfigError("an API key must not be empty")
        if not 0 <= self.shutdown_grace_secs <= 3600:
            raise ConfigError("--shutdown-grace-secs must be between 0 and 3600")
        if self.hosted_tools not in HOSTED_TOOLS_MODES:
            raise ConfigError(f"--hosted-tools must be one of {', '.join(HOSTED_TOOLS_MODES)}")


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not an integer") from exc


def add_core_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """Adds the core's flags; defaults come from the environment where the seed names a variable."""
    parser.add_argument(
        "--model",
        dest="models",
        type=Path,
        action="append",
        default=None,
        help="local mlx-lm model folder, or a Hugging Face repo id already in the local hub "
        "cache; repeat to serve several (the request's `model` picks one; the first loads at "
        "startup, the others on their first request). Default: the bundled tiny chat model",
    )
    parser.add_argument(
        "--allow-download",
        action="store_true",
        help="let --model fetch a repo id missing from the local hub cache (default: never)",
    )
    parser.add_argument(
        "--model-alias",
        dest="model_aliases",
        action="append",
        default=None,
        help="name clients pass as `model` (default: the folder name or repo id); the path is "
        "accepted too. Repeatable: the i-th names the i-th --model",
    )
    parser.add_argument(
        "--max-loaded-models",
        type=int,
        default=None,
        help="most models held in memory at once: loading one more first unloads the least "
        "recently used idle one (default: no limit)",
    )
    parser.add_argument(
        "--grpc-host",
        default="127.0.0.1",
        help="address the gRPC core binds (default 127.0.0.1)",
    )
    parser.add_argument(
        "--grpc-port",
        type=int,
        default=50051,
        help="port of the gRPC core (default 50051)",
    )
    parser.add_argument(
        "--store",
        dest="store_url",
        metavar="URL",
        default=env.get(STORE_URL_ENV) or "memory",
        help="where responses, conversations and background jobs live: 'memory' (this process) "
        f"or redis://host:port/db, shared by every core that names it (env {STORE_URL_ENV})",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve the core's Prometheus metrics on http://GRPC_HOST:PORT/metrics (default off)",
    )
    for spec in STORE_FLAGS:
        parser.add_argument(
            spec.flag,
            type=int,
            dest=spec.field,
            default=_env_int(env, spec.env, spec.default),
            help=f"{spec.help} (default {spec.default}, env {spec.env})",
        )
    parser.add_argument(
        "--max-batch-size",
        type=int,
        default=16,
        help="sequences decoded together in one batch (default 16)",
    )
    parser.add_argument(
        "--max-queued-requests",
        type=int,
        default=64,
        help="requests waiting for a batch slot before new ones get 503 (default 64)",
    )
    parser.add_argument(
        "--prompt-cache-max-entries",
        type=int,
        default=32,
        help="KV caches of finished turns kept for prefix reuse; 0 disables (default 32)",
    )
    parser.add_argument(
        "--prompt-cache-max-bytes",
        type=int,
        default=1024 * 1024 * 1024,
        help="byte budget of the prompt cache (default 1 GiB)",
    )
    add_api_key_argument(parser)
    add_shutdown_argument(parser)
    parser.add_argument(
        "--grpc-tls-cert",
        type=Path,
        default=None,
        help="PEM certificate chain: the gRPC core serves TLS (with --grpc-tls-key)",
    )
    parser.add_argument(
        "--grpc-tls-key", type=Path, default=None, help="PEM private key of --grpc-tls-cert"
    )
    parser.add_argument(
        "--default-max-output-tokens",
        type=int,
        default=4096,
        help="generation cap when a request gives no max_output_tokens (default 4096)",
    )
    parser.add_argument(
        "--speculative",
        choices=SPECULATIVE_MODES,
        default="off",
        help="speculative decoding for greedy requests: ngram drafts from the context (prompt "
        "lookup), draft from --draft-model; output is unchanged (default off)",
    )
    parser.add_argument(
        "--draft-model",
        type=Path,
        default=None,
        help="local mlx-lm folder (or cached hub repo id) of a small model with the same "
        "tokenizer, drafting for --speculative draft",
    )
    parser.add_argument(
        "--num-draft-tokens",
        type=int,
        default=4,
        help="most tokens drafted per sequence and step when --speculative is on (default 4)",
    )
    parser.add_argument(
        "--kv-bits",
        type=int,
        choices=KV_BITS,
        default=None,
        help="quantize the KV cache of live and prompt-cached sequences to 4 or 8 bits "
        "(default: the model's dtype)",
    )
    parser.add_argument(
        "--max-prefill-tokens-per-step",
        type=int,
        default=512,
        help="prompt tokens prefilled between two decode steps while others decode: bounds "
        "the stall a long new prompt causes (default 512)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="batch",
        help="the decode scheduler: batch (mlx-lm's BatchGenerator) or slots (ours: fixed KV "
        "slots, a joining or leaving sequence copies nothing of the others; experimental, "
        "without --speculative and --kv-bits) (default batch)",
    )
    parser.add_argument(
        "--stream-window-ms",
        type=float,
        default=10.0,
        help="a stream's tokens decoded within this window leave as one delta (its first "
        "token never waits; 0: one delta per decode step). Cuts the per-token cost of events, "
        "gRPC and SSE when decoding is fast (default 10)",
    )
    parser.add_argument(
        "--hosted-tools",
        default=env.get(HOSTED_TOOLS_ENV) or "reject",
        help="hosted tools (web_search, ...) in a request: reject them with 400 (seed default) "
        "or drop them and flatten namespace tools, for agents such as Codex "
        f"(default reject, env {HOSTED_TOOLS_ENV})",
    )


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """Builds the frozen settings from parsed flags and the environment."""
    values = {f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)}
    values["models"] = tuple(args.models or (BUNDLED_MODEL,))
    values["model_aliases"] = tuple(args.model_aliases or ())
    values["reasoning_echo_max_bytes"] = _env_int(env, REASONING_ECHO_ENV, 16 * 1024 * 1024)
    values["blas"] = env.get(BLAS_ENV, "auto")
    values["api_keys"] = api_keys_from(args.api_keys, env)
    return Settings(**values)


def add_api_key_argument(parser: argparse.ArgumentParser) -> None:
    """`--api-key` (repeatable); `serve` gets it from both sides, hence conflict_handler=resolve."""
    parser.add_argument(
        "--api-key",
        dest="api_keys",
        action="append",
        default=None,
        help=f"accepted API key (repeatable; env {API_KEY_ENV}, comma-separated); "
        "clients send `Authorization: Bearer KEY`. Default: no key required",
    )


def add_shutdown_argument(parser: argparse.ArgumentParser) -> None:
    """`--shutdown-grace-secs` (the façade defines the same flag; `serve` resolves them)."""
    parser.add_argument(
        "--shutdown-grace-secs",
        type=float,
        default=DEFAULT_SHUTDOWN_GRACE_SECS,
        help="on SIGTERM, seconds running responses and background jobs get to finish before "
        f"they are cancelled (default {DEFAULT_SHUTDOWN_GRACE_SECS:g})",
    )


def api_keys_from(flags: list[str] | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The keys of the flags and of the environment variable, in order, without duplicates."""
    from_env = [k.strip() for k in env.get(API_KEY_ENV, "").split(",") if k.strip()]
    return tuple(dict.fromkeys([*(flags or []), *from_env]))


def read_environment() -> Mapping[str, str]:
    """The only place that reads the process environment."""
    return dict(os.environ)
