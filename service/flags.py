"""Every flag and environment variable of `mlx-responses`, declared once.

Each declaration gives the flag's name, the settings field it fills, its type, default, environment
variable, help, and the commands that take it. The argparse parsers (`serve`, `core`, `facade`),
the defaults of the core's `Settings` and the façade's `FacadeSettings` (both `config.py`), and
the docs' flags page (`docs/reference/flags.md`, written by `tools/gen_docs.py`) all come from here.

This module imports the standard library only, so the HTTP façade may import it without pulling
the core or MLX (tests/unit/test_layering.py holds both to that).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# The commands of `mlx-responses`, and the top-level parser (flags given before the command).
SERVE, CORE, FACADE, TOP = "serve", "core", "facade", "mlx-responses"
COMMANDS = (SERVE, CORE, FACADE)
CORE_SIDE = (SERVE, CORE)  # the gRPC core runs in these
FACADE_SIDE = (SERVE, FACADE)  # the HTTP façade runs in these


class EnvValueError(ValueError):
    """An environment variable whose value the flag's type cannot read."""


@dataclass(frozen=True)
class Flag(Generic[T]):
    """One setting: a command-line flag, an environment variable, or both."""

    flag: str | None  # None: set by its environment variable only
    field: str  # the settings field (and argparse dest) it fills
    default: T
    help: str  # what it does; the default and the variable are appended where shown
    commands: tuple[str, ...]
    env: str | None = None
    type: Callable[[str], Any] | None = str
    action: str | None = None  # "append" (repeatable) or "store_true"
    choices: tuple[Any, ...] | None = None
    # The settings check the choices (a ConfigError, exit 2) instead of argparse (a usage error).
    settings_check_choices: bool = False
    metavar: str | None = None
    required: bool = False
    shown_default: str | None = None  # how help and docs word the default, when not the value
    # The variable adds comma-separated values after the flag's (instead of being its default).
    env_adds: bool = False

    @property
    def default_text(self) -> str:
        """The default as help and docs show it."""
        if self.shown_default is not None:
            return self.shown_default
        if self.required:
            return "none (required)"
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return str(self.default)

    def help_text(self) -> str:
        """The --help line: what it does, then its default and variable."""
        tail = [] if self.required else [f"default {self.default_text}"]
        if self.env is not None:
            tail.append(f"env {self.env}" + (", comma-separated" if self.env_adds else ""))
        text = f"{self.help} ({'; '.join(tail)})" if tail else self.help
        return text.replace("%", "%%")  # argparse formats help with %


def env_value(spec: Flag[Any], env: Mapping[str, str]) -> Any:
    """The flag's default, or its environment variable's value read with the flag's type."""
    raw = None if spec.env is None or spec.env_adds else env.get(spec.env)
    if raw is None or raw == "":
        return spec.default
    if spec.action == "store_true":
        if raw.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if raw.strip().lower() in ("0", "false", "no", "off"):
            return False
        raise EnvValueError(f"{spec.env}={raw!r} is not a boolean (1/0, true/false)")
    if spec.type is int:
        try:
            return int(raw)
        except ValueError as exc:
            raise EnvValueError(f"{spec.env}={raw!r} is not an integer") from exc
    if spec.type is None:
        return raw
    try:
        return spec.type(raw)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise EnvValueError(f"{spec.env}={raw!r}: {exc}") from exc


# --- before the command ---------------------------------------------------------------------
LOG_LEVEL = Flag("--log-level", "log_level", "INFO", "logging level (DEBUG, INFO, WARNING)", (TOP,))
LOG_FORMAT = Flag(
    "--log-format",
    "log_format",
    "text",
    "text lines, or one JSON object per line; both carry request ids",
    (TOP,),
    choices=("text", "json"),
)

# Ollama's `keep_alive`: a number of seconds, or a Go duration ("1h30m", "300ms"); negative
# (or beyond KEEP_FOREVER_SECS) keeps the model loaded for good.
KEEP_FOREVER = -1.0
KEEP_FOREVER_SECS = 1e9  # about 31 years: forever, and an expiry time that fits int64
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_UNIT = r"(?:ns|us|µs|μs|ms|s|m|h)"
_SECONDS = re.compile(rf"[+-]?{_NUMBER}")
_DURATION = re.compile(rf"([+-]?)((?:{_NUMBER}{_UNIT})+)")
_PART = re.compile(rf"({_NUMBER})({_UNIT})")
# What a `keep_alive` string may be (the OpenAPI document's pattern).
KEEP_ALIVE_PATTERN = rf"^[+-]?(?:{_NUMBER}|(?:{_NUMBER}{_UNIT})+)$"
_UNIT_SECS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1}
_UNIT_SECS.update(m=60, h=3600)


def keep_alive_seconds(value: object) -> float:
    """Ollama's `keep_alive` as seconds (KEEP_FOREVER: stay loaded); ValueError if it is none.

    A number is seconds; a string is a number of seconds ("-1", "3600") or a duration of
    numbers with units ns, us, ms, s, m, h ("5m", "1h30m", "-1m").
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("expected a number of seconds or a duration string such as '5m'")
    if isinstance(value, str):
        if _SECONDS.fullmatch(value):
            seconds = float(value)
        elif match := _DURATION.fullmatch(value):
            total = sum(float(n) * _UNIT_SECS[u] for n, u in _PART.findall(match.group(2)))
            seconds = -total if match.group(1) == "-" else total
        else:
            raise ValueError(f"{value!r} is not a number of seconds or a duration such as '5m'")
    else:
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond any double: for good, either way
            return KEEP_FOREVER
    if math.isnan(seconds):
        raise ValueError("not a number")
    return KEEP_FOREVER if seconds < 0 or seconds > KEEP_FOREVER_SECS else seconds


# --- models ---------------------------------------------------------------------------------
MODEL = Flag(
    "--model",
    "models",
    None,
    "local mlx-lm model folder, or a Hugging Face repo id already in the local hub cache; repeat "
    "to serve several (the request's `model` picks one; the first loads at startup, the others on "
    "their first request)",
    CORE_SIDE,
    type=Path,
    action="append",
    shown_default="the bundled tiny chat model",
)
ALLOW_DOWNLOAD = Flag(
    "--allow-download",
    "allow_download",
    False,
    "let --model fetch a repo id missing from the local hub cache",
    CORE_SIDE,
    type=None,
    action="store_true",
    shown_default="never",
)
MODEL_ALIAS = Flag(
    "--model-alias",
    "model_aliases",
    None,
    "name clients pass as `model`; the path is accepted too. Repeatable: the i-th names the "
    "i-th --model",
    CORE_SIDE,
    action="append",
    shown_default="the folder name or repo id",
)
MAX_LOADED_MODELS = Flag(
    "--max-loaded-models",
    "max_loaded_models",
    None,
    "most models held in memory at once: loading one more first unloads the least recently "
    "used idle one",
    CORE_SIDE,
    type=int,
    shown_default="no limit",
)
MODEL_DIR = Flag(
    "--model-dir",
    "model_dirs",
    None,
    "folder whose every model folder (config.json and weights) is served, named by its folder "
    "name; a folder added later is found on the first request or /v1/models listing naming it. "
    "Repeatable; combines with --model",
    CORE_SIDE,
    type=Path,
    action="append",
    metavar="DIR",
    shown_default="none",
)
KEEP_ALIVE = Flag(
    "--keep-alive",
    "keep_alive",
    300.0,
    "how long a model stays loaded once idle, unless a request's `keep_alive` says otherwise: "
    "seconds or a duration (30s, 5m, 1h); -1 keeps it loaded, 0 unloads it after each request",
    CORE_SIDE,
    type=keep_alive_seconds,
    metavar="DURATION",
    shown_default="5m",
)
PIN = Flag(
    "--pin",
    "pins",
    None,
    "a model (its id, folder name or path) loaded at startup and never unloaded by keep-alive "
    "or --max-loaded-models; repeatable",
    CORE_SIDE,
    action="append",
    metavar="MODEL",
    shown_default="none",
)

# --- the gRPC core ------------------------------------------------------------------------
GRPC_HOST = Flag("--grpc-host", "grpc_host", "127.0.0.1", "address the gRPC core binds", CORE_SIDE)
GRPC_PORT = Flag("--grpc-port", "grpc_port", 50051, "port of the gRPC core", CORE_SIDE, type=int)
GRPC_TLS_CERT = Flag(
    "--grpc-tls-cert",
    "grpc_tls_cert",
    None,
    "PEM certificate chain: the gRPC core serves TLS (with --grpc-tls-key)",
    CORE_SIDE,
    type=Path,
    shown_default="off",
)
GRPC_TLS_KEY = Flag(
    "--grpc-tls-key",
    "grpc_tls_key",
    None,
    "PEM private key of --grpc-tls-cert",
    CORE_SIDE,
    type=Path,
    shown_default="off",
)
METRICS_PORT = Flag(
    "--metrics-port",
    "metrics_port",
    None,
    "serve the core's Prometheus metrics on http://GRPC_HOST:PORT/metrics",
    CORE_SIDE,
    type=int,
    shown_default="off",
)

# --- stores (the seed's storage flags: names, defaults and variables exactly as it gives them) ---
STORE_URL = Flag(
    "--store",
    "store_url",
    "memory",
    "where responses, conversations and background jobs live: 'memory' (this process) or "
    "redis://host:port/db, shared by every core that names it",
    CORE_SIDE,
    env="MLX_RESPONSES_STORE_URL",
    metavar="URL",
)
RESPONSES_STORE_MAX_ENTRIES = Flag(
    "--responses-store-max-entries",
    "responses_store_max_entries",
    1024,
    "stored responses kept (LRU); 0 disables response persistence",
    CORE_SIDE,
    env="LLAMA_ARG_RESPONSES_STORE_MAX_ENTRIES",
    type=int,
)
RESPONSES_STORE_MAX_BYTES = Flag(
    "--responses-store-max-bytes",
    "responses_store_max_bytes",
    268435456,
    "approximate retained-byte budget of stored responses; 0 evicts at once",
    CORE_SIDE,
    env="MLXCEL_RESPONSES_STORE_MAX_BYTES",
    type=int,
)
RESPONSES_STORE_TTL_SECS = Flag(
    "--responses-store-ttl-secs",
    "responses_store_ttl_secs",
    3600,
    "seconds a stored response lives after it is stored; 0 disables TTL",
    CORE_SIDE,
    env="LLAMA_ARG_RESPONSES_STORE_TTL_SECS",
    type=int,
)
RESPONSES_BACKGROUND_MAX_JOBS = Flag(
    "--responses-background-max-jobs",
    "responses_background_max_jobs",
    64,
    "cap on concurrently active background responses; 0 disables background mode",
    CORE_SIDE,
    env="MLXCEL_RESPONSES_BACKGROUND_MAX_JOBS",
    type=int,
)
RESPONSES_BACKGROUND_EPHEMERAL_TTL_SECS = Flag(
    "--responses-background-ephemeral-ttl-secs",
    "responses_background_ephemeral_ttl_secs",
    600,
    "seconds the final object of a store:false background response stays readable (>= 1)",
    CORE_SIDE,
    env="MLXCEL_RESPONSES_BACKGROUND_EPHEMERAL_TTL_SECS",
    type=int,
)
CONVERSATION_STORE_MAX_ENTRIES = Flag(
    "--conversation-store-max-entries",
    "conversation_store_max_entries",
    256,
    "conversation transcripts kept (LRU); 0 disables conversations",
    CORE_SIDE,
    env="LLAMA_ARG_CONVERSATION_STORE_MAX_ENTRIES",
    type=int,
)
CONVERSATION_STORE_MAX_BYTES = Flag(
    "--conversation-store-max-bytes",
    "conversation_store_max_bytes",
    67108864,
    "approximate retained-byte budget of transcripts; 0 evicts at once",
    CORE_SIDE,
    env="MLXCEL_CONVERSATION_STORE_MAX_BYTES",
    type=int,
)
CONVERSATION_STORE_TTL_SECS = Flag(
    "--conversation-store-ttl-secs",
    "conversation_store_ttl_secs",
    3600,
    "seconds a transcript lives after its last update; 0 disables TTL",
    CORE_SIDE,
    env="LLAMA_ARG_CONVERSATION_STORE_TTL_SECS",
    type=int,
)
STORE_FLAGS: tuple[Flag[int], ...] = (
    RESPONSES_STORE_MAX_ENTRIES,
    RESPONSES_STORE_MAX_BYTES,
    RESPONSES_STORE_TTL_SECS,
    RESPONSES_BACKGROUND_MAX_JOBS,
    RESPONSES_BACKGROUND_EPHEMERAL_TTL_SECS,
    CONVERSATION_STORE_MAX_ENTRIES,
    CONVERSATION_STORE_MAX_BYTES,
    CONVERSATION_STORE_TTL_SECS,
)

# --- generation -----------------------------------------------------------------------------
MAX_BATCH_SIZE = Flag(
    "--max-batch-size",
    "max_batch_size",
    16,
    "sequences decoded together in one batch",
    CORE_SIDE,
    type=int,
)
MAX_QUEUED_REQUESTS = Flag(
    "--max-queued-requests",
    "max_queued_requests",
    64,
    "requests waiting for a batch slot before new ones get 503",
    CORE_SIDE,
    type=int,
)
_SIZE_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_MEMORY = 1 << 60  # bytes: an exbibyte, beyond any machine (and int64-safe)


def finite_float(text: str) -> float:
    """A flag's number: finite (`nan`, `inf` and overflowing ones are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"invalid number {text!r}: it must be finite")
    return value


def memory_size(text: str) -> float:
    """A memory size: bytes (`8589934592`, or with a binary suffix: `8G`, `768M`, `512KiB`), or
    a fraction below 1 (`0.75`: of the device's memory)."""
    raw = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = _SIZE_SUFFIXES.get(raw[-1:], 1) if raw else 1
    number = raw[:-1] if scale != 1 else raw
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):  # also nan, inf, infinity: letters float() takes
        raise argparse.ArgumentTypeError(
            f"invalid memory size {text!r}: bytes (8589934592, 8G, 768M) or a fraction below 1"
        )
    if value <= 0 or (value >= 1 and scale == 1 and value != int(value)):
        raise argparse.ArgumentTypeError(
            f"invalid memory size {text!r}: a positive number of bytes or a fraction below 1"
        )
    if value * scale > MAX_MEMORY:
        raise argparse.ArgumentTypeError(
            f"invalid memory size {text!r}: more than {MAX_MEMORY >> 60} EiB"
        )
    return value * scale if value >= 1 or scale != 1 else value


MEMORY_LIMIT = Flag(
    "--memory-limit",
    "memory_limit",
    None,
    "memory budget of the whole process (weights, live KV caches, the prompt cache and the "
    "runtime, as ps or Activity Monitor show it): bytes (8G, 768M) or a fraction below 1 of the "
    "device's memory. A request is admitted when its prompt plus max_output_tokens fits, else "
    "it waits while the prompt cache gives memory back; one that can never fit is a 400 "
    "(docs/operations.md)",
    CORE_SIDE,
    env="MLX_RESPONSES_MEMORY_LIMIT",
    type=memory_size,
    metavar="SIZE",
    shown_default="90% of the GPU's recommended working set on Metal; none on a CPU",
)


PROMPT_CACHE_MAX_ENTRIES = Flag(
    "--prompt-cache-max-entries",
    "prompt_cache_max_entries",
    32,
    "KV caches of finished turns kept for prefix reuse; 0 disables",
    CORE_SIDE,
    type=int,
)
PROMPT_CACHE_MAX_BYTES = Flag(
    "--prompt-cache-max-bytes",
    "prompt_cache_max_bytes",
    1024 * 1024 * 1024,
    "byte budget of the prompt cache",
    CORE_SIDE,
    type=int,
    shown_default="1073741824 (1 GiB)",
)
PROMPT_CHECKPOINT_TOKENS = Flag(
    "--prompt-checkpoint-tokens",
    "prompt_checkpoint_tokens",
    4096,
    "models whose caches cannot be cut back (recurrent state, sliding windows: Qwen3.5, "
    "gpt-oss, Gemma 3): a long prompt's prefill also keeps a checkpoint of the whole cache "
    "every this many tokens (the deepest 4), so a prompt edited or compacted inside it starts "
    "from the last one before the change; 0 disables (docs/guides/prompt-cache.md)",
    CORE_SIDE,
    type=int,
)
PROMPT_CACHE_DIR = Flag(
    "--prompt-cache-dir",
    "prompt_cache_dir",
    None,
    "folder of the prompt cache's disk tier: long prompts' KV caches kept across restarts, "
    "keyed by model, chat template and --kv-bits (docs/guides/prompt-cache.md)",
    CORE_SIDE,
    env="MLX_RESPONSES_PROMPT_CACHE_DIR",
    type=Path,
    metavar="PATH",
    shown_default="$XDG_CACHE_HOME/mlx-responses/prompt-cache, else ~/.cache/mlx-responses/...",
)
PROMPT_CACHE_DISK_BYTES = Flag(
    "--prompt-cache-disk-bytes",
    "prompt_cache_disk_bytes",
    16 * 1024 * 1024 * 1024,
    "byte budget of the prompt cache's disk tier (least recently used entries go); 0 disables it",
    CORE_SIDE,
    env="MLX_RESPONSES_PROMPT_CACHE_DISK_BYTES",
    type=int,
    shown_default="17179869184 (16 GiB)",
)
NO_PROMPT_CACHE_DISK = Flag(
    "--no-prompt-cache-disk",
    "no_prompt_cache_disk",
    False,
    "keep the prompt cache in memory only: no disk tier",
    CORE_SIDE,
    env="MLX_RESPONSES_NO_PROMPT_CACHE_DISK",
    type=None,
    action="store_true",
    shown_default="off (the disk tier is on)",
)


def default_prompt_cache_dir(env: Mapping[str, str]) -> Path:
    """`$XDG_CACHE_HOME/mlx-responses/prompt-cache`, else under `~/.cache` (as Hugging Face's)."""
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mlx-responses" / "prompt-cache"


MAX_PROMPT_TOKENS = Flag(
    "--max-prompt-tokens",
    "max_prompt_tokens",
    0,
    "the most tokens a request's rendered input (history included) may have; a longer one is a "
    "400 context_length_exceeded before any prefill; 0: the model's context window only",
    CORE_SIDE,
    type=int,
)
DEFAULT_MAX_OUTPUT_TOKENS = Flag(
    "--default-max-output-tokens",
    "default_max_output_tokens",
    4096,
    "generation cap when a request gives no max_output_tokens",
    CORE_SIDE,
    type=int,
)
SPECULATIVE = Flag(
    "--speculative",
    "speculative",
    "ngram",
    "speculative decoding: ngram drafts from the context (prompt lookup), draft from "
    "--draft-model, off (none) for neither; greedy output is unchanged and sampled output keeps "
    "its distribution (a seeded request's tokens are unchanged with ngram); each sequence's "
    "draft length follows what its drafts keep, and drafting steps aside where it would cost "
    "more than it saves",
    CORE_SIDE,
    env="MLX_RESPONSES_SPECULATIVE",
    choices=("off", "none", "ngram", "draft"),
)
DRAFT_MODEL = Flag(
    "--draft-model",
    "draft_model",
    None,
    "local mlx-lm folder (or cached hub repo id) of a small model with the same tokenizer, "
    "drafting for --speculative draft (for the first --model; the others serve without it)",
    CORE_SIDE,
    type=Path,
    shown_default="none",
)
NO_MTP = Flag(
    "--no-mtp",
    "no_mtp",
    False,
    "do not draft with the checkpoint's own multi-token-prediction head (Qwen3.5's mtp.* "
    "weights, DeepSeek-V3's and GLM-4.5's last layer); by default a model that ships one "
    "drafts with it in place of --speculative ngram's drafts (--speculative off or draft: not "
    "either)",
    CORE_SIDE,
    env="MLX_RESPONSES_NO_MTP",
    type=None,
    action="store_true",
)
NUM_DRAFT_TOKENS = Flag(
    "--num-draft-tokens",
    "num_draft_tokens",
    4,
    "most tokens drafted per sequence and step (each sequence's draft length adapts below it)",
    CORE_SIDE,
    type=int,
)
KV_BITS = Flag(
    "--kv-bits",
    "kv_bits",
    None,
    "quantize the KV cache of live and prompt-cached sequences to 4 or 8 bits",
    CORE_SIDE,
    type=int,
    choices=(4, 8),
    shown_default="the model's dtype",
)
# The two prefill flags default by the device MLX runs on (`prefill_for_device` below): on a
# GPU (Metal or CUDA) many prompts prefilled in one big step fill it (measured on an H200, 64
# streams: 0.97-1.16x in-process BatchGenerator against 0.43-0.67x with the CPU's values); on
# a CPU an 8k-token prefill stalls the running streams for seconds.
GPU_PREFILL_TOKENS_PER_STEP = 8192
CPU_PREFILL_TOKENS_PER_STEP = 512
CPU_PREFILL_BATCH_SIZE = 8
MAX_PREFILL_TOKENS_PER_STEP = Flag(
    "--max-prefill-tokens-per-step",
    "max_prefill_tokens_per_step",
    None,
    "prompt tokens prefilled between two decode steps while others decode: bounds the stall a "
    "long new prompt causes",
    CORE_SIDE,
    type=int,
    shown_default=f"{GPU_PREFILL_TOKENS_PER_STEP} on a GPU (Metal or CUDA), "
    f"{CPU_PREFILL_TOKENS_PER_STEP} on the CPU",
)
PREFILL_BATCH_SIZE = Flag(
    "--prefill-batch-size",
    "prefill_batch_size",
    None,
    "new prompts prefilled together in one batch (at most --max-batch-size): more fills an "
    "accelerator better when many requests arrive at once",
    CORE_SIDE,
    type=int,
    shown_default=f"--max-batch-size on a GPU (Metal or CUDA), {CPU_PREFILL_BATCH_SIZE} on the CPU",
)
ALLOW_CLIENT_CHAT_TEMPLATE = Flag(
    "--allow-client-chat-template",
    "allow_client_chat_template",
    False,
    "let a request replace the model's chat template with its own Jinja "
    "(`chat_template_kwargs.chat_template`, still sandboxed and time-bound); off, such a "
    "request is a 400",
    CORE_SIDE,
    env="MLX_RESPONSES_ALLOW_CLIENT_CHAT_TEMPLATE",
    type=None,
    action="store_true",
    shown_default="off",
)
ISOLATE_KEYS = Flag(
    "--isolate-keys",
    "isolate_keys",
    False,
    "each response, background job and conversation belongs to the API key that made it: "
    "another key gets 404 (needs --api-key; off, any valid key reads any id, as at OpenAI)",
    CORE_SIDE,
    env="MLX_RESPONSES_ISOLATE_KEYS",
    type=None,
    action="store_true",
    shown_default="off",
)
ENGINE = Flag(
    "--engine",
    "engine",
    "auto",
    "decode scheduler: slots (ours: fixed KV slots, a joining or leaving sequence copies "
    "nothing of the others), batch (mlx-lm's BatchGenerator), or auto: slots on a CPU, batch "
    "on a GPU (until slots are measured on one) and whenever the model's caches are ones slots "
    "do not hold (mixed windows, recurrent layers)",
    CORE_SIDE,
    choices=("auto", "batch", "slots"),
)
STREAM_WINDOW_MS = Flag(
    "--stream-window-ms",
    "stream_window_ms",
    25.0,
    "a stream's tokens decoded within this window (at most 16) leave as one delta (its first "
    "token never waits; 0: one delta per decode step; widened to (streams decoding)/400 s, "
    "at most 0.1 s, when that is longer): cuts the per-token cost of events, gRPC and SSE "
    "when decoding is fast or streams are many",
    CORE_SIDE,
    type=finite_float,
)
BATCH_WAIT_MS = Flag(
    "--batch-wait-ms",
    "batch_wait_ms",
    0.0,
    "when the engine is idle and a request arrives, wait this long for more (each arrival "
    "waits again, at most 4× in all) so that a burst starts as one batch: one prefill instead "
    "of one per arrival, for agents that fan out many requests at once; every request that "
    "finds the engine idle pays the wait (0: start at once)",
    CORE_SIDE,
    type=finite_float,
)
DISTRIBUTED = Flag(
    "--distributed",
    "distributed",
    "auto",
    "under mlx.launch (several processes, one model): how the ranks split it: tensor (every "
    "layer across the ranks: the model's shard()), pipeline (a run of layers per rank: "
    "model.pipeline()), or auto: tensor where the model can, else pipeline; rank 0 serves, the "
    "others run only the engine (docs/guides/distributed.md). One process: no effect",
    CORE_SIDE,
    choices=("auto", "tensor", "pipeline"),
)
DISTRIBUTED_TIMEOUT = Flag(
    "--distributed-timeout",
    "distributed_timeout",
    60.0,
    "under mlx.launch, seconds without a completed step after which the group counts as lost "
    "(a rank died or stalled): requests in flight fail, the core's health turns NOT_SERVING "
    "and stays so until the operator restarts the group",
    CORE_SIDE,
    type=finite_float,
)
HOSTED_TOOLS = Flag(
    "--hosted-tools",
    "hosted_tools",
    "reject",
    "hosted tools (web_search, ...) in a request: reject them with 400 (the seed's behaviour) "
    "or drop them and flatten namespace tools, for agents such as Codex",
    CORE_SIDE,
    env="MLXCEL_HOSTED_TOOLS",
    choices=("reject", "drop"),
    settings_check_choices=True,
)
MAX_MEDIA_BYTES = Flag(
    "--max-media-bytes",
    "max_media_bytes",
    10 * 1024 * 1024,
    "largest image or file part a request may send, in decoded bytes; a larger one is a 400 "
    "naming the part (base64 adds a third: keep --max-request-bytes above it)",
    CORE_SIDE,
    type=int,
)
MAX_IMAGE_PIXELS = Flag(
    "--max-image-pixels",
    "max_image_pixels",
    16 * 1024 * 1024,
    "largest image a request may send, width x height (read from its header before decoding); "
    "a larger one is a 400 naming the part",
    CORE_SIDE,
    type=int,
)
ALLOW_REMOTE_MEDIA = Flag(
    "--allow-remote-media",
    "allow_remote_media",
    False,
    "vision models: fetch the http(s) image URLs a request names (capped by --max-media-bytes, "
    "with a timeout, no redirects, no loopback or private addresses); off, they are a 400",
    CORE_SIDE,
    type=None,
    action="store_true",
    shown_default="off",
)
REMOTE_MEDIA_TIMEOUT_SECS = Flag(
    "--remote-media-timeout-secs",
    "remote_media_timeout_secs",
    10.0,
    "with --allow-remote-media: seconds one fetch may take",
    CORE_SIDE,
    type=finite_float,
)
IMAGE_ENCODING_CACHE_ENTRIES = Flag(
    "--image-encoding-cache-entries",
    "image_encoding_cache_entries",
    64,
    "vision models: image encodings kept by content hash, so a resent image skips the vision "
    "tower; 0 disables",
    CORE_SIDE,
    type=int,
)
IMAGE_ENCODING_CACHE_BYTES = Flag(
    "--image-encoding-cache-bytes",
    "image_encoding_cache_bytes",
    1024 * 1024 * 1024,
    "vision models: byte bound of the image-encoding cache, beside its entries (an encoding "
    "is ~7 MB for a 1,000-token image on Qwen2.5-VL-7B, ~4x that on Qwen3-VL with its "
    "deepstack features: 1 GiB keeps the default 64 entries of the first, and bounds the "
    "second); an encoding larger is not kept; it counts in --memory-limit's budget; 0 disables",
    CORE_SIDE,
    type=int,
    shown_default="1073741824 (1 GiB)",
)
MEDIA = Flag(
    "--media",
    "media",
    "reject",
    "image, file and audio parts sent to a text-only model: reject them with 400 (the seed's "
    "behaviour) or replace each with a short text placeholder, for agents such as Codex that "
    "keep images in the history they resend",
    CORE_SIDE,
    env="MLXCEL_MEDIA",
    choices=("reject", "drop"),
    settings_check_choices=True,
)
REASONING_ECHO_MAX_BYTES = Flag(
    None,
    "reasoning_echo_max_bytes",
    16 * 1024 * 1024,
    "byte budget of the reasoning echo (reasoning replayed to the model on the next turn); "
    "0 disables it",
    CORE_SIDE,
    env="MLXCEL_REASONING_ECHO_MAX_BYTES",
    type=int,
    shown_default="16777216 (16 MiB)",
)
BLAS = Flag(
    None,
    "blas",
    "auto",
    "BLAS library MLX's CPU backend uses: 'auto' (the first system OpenBLAS found), "
    "'reference' (the wheel's own), or a path to a library",
    CORE_SIDE,
    env="MLX_RESPONSES_BLAS",
)

# --- both sides -----------------------------------------------------------------------------
API_KEY = Flag(
    "--api-key",
    "api_keys",
    None,
    "accepted API key (repeatable); clients send `Authorization: Bearer KEY`; `serve` checks it "
    "on both sides",
    COMMANDS,
    env="MLX_RESPONSES_API_KEY",
    action="append",
    env_adds=True,
    shown_default="no key required",
)
SHUTDOWN_GRACE_SECS = Flag(
    "--shutdown-grace-secs",
    "shutdown_grace_secs",
    10.0,
    "on SIGTERM, seconds running requests, responses and background jobs get to finish before "
    "they are cancelled",
    COMMANDS,
    type=finite_float,
)

# --- the HTTP façade ------------------------------------------------------------------------
HOST = Flag("--host", "host", "127.0.0.1", "address the HTTP façade binds", FACADE_SIDE)
PORT = Flag("--port", "port", 8080, "HTTP port", FACADE_SIDE, type=int)
MAX_REQUEST_BYTES = Flag(
    "--max-request-bytes",
    "max_request_bytes",
    16 * 1024 * 1024,
    "largest request body accepted, in bytes; larger ones get 413",
    FACADE_SIDE,
    type=int,
)
CORE_ADDRESS = Flag(
    "--core",
    "core",
    None,
    "address of a gRPC core; repeat for several (or dns:///name:port for all the addresses a "
    "name resolves to); requests go to the SERVING ones (see --core-routing)",
    (FACADE,),
    action="append",
    metavar="HOST:PORT",
    required=True,
)
CORE_TLS_CA = Flag(
    "--core-tls-ca",
    "core_tls_ca",
    None,
    "PEM root certificates: reach the core(s) over TLS, verified against them",
    (FACADE,),
    type=Path,
    shown_default="off",
)
CORE_ROUTING = Flag(
    "--core-routing",
    "core_routing",
    "cache",
    "how requests are spread over several --core: cache (the core that most likely holds the "
    "prompt's prefix in its prompt cache: the same prompt_cache_key, conversation, chain or "
    "prompt start goes to the same core, by rendezvous hashing, unless it is busy) or "
    "round_robin",
    (FACADE,),
    choices=("cache", "round_robin"),
)

FLAGS: tuple[Flag[Any], ...] = (
    LOG_LEVEL,
    LOG_FORMAT,
    HOST,
    PORT,
    MAX_REQUEST_BYTES,
    CORE_ADDRESS,
    CORE_TLS_CA,
    CORE_ROUTING,
    API_KEY,
    SHUTDOWN_GRACE_SECS,
    MODEL,
    ALLOW_DOWNLOAD,
    MODEL_ALIAS,
    MAX_LOADED_MODELS,
    MODEL_DIR,
    KEEP_ALIVE,
    PIN,
    GRPC_HOST,
    GRPC_PORT,
    GRPC_TLS_CERT,
    GRPC_TLS_KEY,
    METRICS_PORT,
    STORE_URL,
    *STORE_FLAGS,
    MAX_BATCH_SIZE,
    MAX_QUEUED_REQUESTS,
    MEMORY_LIMIT,
    PROMPT_CACHE_MAX_ENTRIES,
    PROMPT_CACHE_MAX_BYTES,
    PROMPT_CHECKPOINT_TOKENS,
    PROMPT_CACHE_DIR,
    PROMPT_CACHE_DISK_BYTES,
    NO_PROMPT_CACHE_DISK,
    MAX_PROMPT_TOKENS,
    DEFAULT_MAX_OUTPUT_TOKENS,
    SPECULATIVE,
    DRAFT_MODEL,
    NO_MTP,
    NUM_DRAFT_TOKENS,
    KV_BITS,
    MAX_PREFILL_TOKENS_PER_STEP,
    PREFILL_BATCH_SIZE,
    ENGINE,
    STREAM_WINDOW_MS,
    BATCH_WAIT_MS,
    DISTRIBUTED,
    DISTRIBUTED_TIMEOUT,
    HOSTED_TOOLS,
    ALLOW_CLIENT_CHAT_TEMPLATE,
    ISOLATE_KEYS,
    MAX_MEDIA_BYTES,
    MAX_IMAGE_PIXELS,
    ALLOW_REMOTE_MEDIA,
    REMOTE_MEDIA_TIMEOUT_SECS,
    IMAGE_ENCODING_CACHE_ENTRIES,
    IMAGE_ENCODING_CACHE_BYTES,
    MEDIA,
    REASONING_ECHO_MAX_BYTES,
    BLAS,
)


def add_arguments(parser: argparse.ArgumentParser, command: str, env: Mapping[str, str]) -> None:
    """Adds every flag `command` takes (TOP: the ones before the command), each once.

    A variable that gives a default is read here: a flag on the command line overrides it.
    Raises EnvValueError for a variable the flag's type cannot read.
    """
    for spec in FLAGS:
        if spec.flag is None or command not in spec.commands:
            continue
        kwargs: dict[str, Any] = {"dest": spec.field, "help": spec.help_text()}
        if spec.action is not None:
            kwargs["action"] = spec.action
        # A store_true flag's variable turns it on; the others' give their default.
        kwargs["default"] = env_value(spec, env)
        if spec.action != "store_true" and spec.type is not None and spec.type is not str:
            kwargs["type"] = spec.type
        if spec.choices is not None and spec.settings_check_choices:
            kwargs["metavar"] = "{" + ",".join(str(c) for c in spec.choices) + "}"
        elif spec.choices is not None:
            kwargs["choices"] = spec.choices
        if spec.metavar is not None:
            kwargs["metavar"] = spec.metavar
        if spec.required:
            kwargs["required"] = True
        parser.add_argument(spec.flag, **kwargs)


def api_keys_from(flags: list[str] | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The keys of the flags and of the environment variable, in order, without duplicates."""
    assert API_KEY.env is not None
    from_env = [k.strip() for k in env.get(API_KEY.env, "").split(",") if k.strip()]
    return tuple(dict.fromkeys([*(flags or []), *from_env]))


@dataclass(frozen=True)
class Prefill:
    """How new prompts are prefilled: prompts per batch, and prompt tokens between two steps."""

    batch_size: int
    tokens_per_step: int


def prefill_for_device(
    device: str,
    max_batch_size: int,
    batch_size: int | None = None,
    tokens_per_step: int | None = None,
) -> Prefill:
    """The prefill settings on `device` ("gpu" or "cpu"): a value given (flag) wins, else the
    device's default; the batch is at most `max_batch_size`."""
    gpu = device == "gpu"
    if batch_size is None:
        batch_size = max_batch_size if gpu else CPU_PREFILL_BATCH_SIZE
    if tokens_per_step is None:
        tokens_per_step = GPU_PREFILL_TOKENS_PER_STEP if gpu else CPU_PREFILL_TOKENS_PER_STEP
    return Prefill(min(batch_size, max_batch_size), tokens_per_step)
