"""Frozen settings of the HTTP façade, read once from flags (and the environment) at startup."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

API_KEY_ENV = "MLX_RESPONSES_API_KEY"
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
DEFAULT_SHUTDOWN_GRACE_SECS = 10.0
# A body becomes one gRPC message (about its size as a proto); the core's message limit caps it.
MAX_REQUEST_BYTES_CEILING = 64 * 1024 * 1024


class FacadeConfigError(ValueError):
    """A façade setting that cannot start the server."""


@dataclass(frozen=True)
class FacadeSettings:
    """Everything the façade needs to start, fixed at startup and passed down."""

    host: str = "127.0.0.1"
    port: int = 8080
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    # Never in a repr (settings may be logged): keys are secrets.
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    core_tls_ca: Path | None = None
    shutdown_grace_secs: float = DEFAULT_SHUTDOWN_GRACE_SECS

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise FacadeConfigError("--port must be between 0 and 65535")
        if not 1 <= self.max_request_bytes <= MAX_REQUEST_BYTES_CEILING:
            raise FacadeConfigError(
                f"--max-request-bytes must be between 1 and {MAX_REQUEST_BYTES_CEILING}"
            )
        if any(not key for key in self.api_keys):
            raise FacadeConfigError("an API key must not be empty")
        if not 0 <= self.shutdown_grace_secs <= 3600:
            raise FacadeConfigError("--shutdown-grace-secs must be between 0 and 3600")


def add_facade_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """Adds the façade's flags (`serve` and `facade` both take them)."""
    parser.add_argument(
        "--host", default="127.0.0.1", help="address the HTTP façade binds (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        help="largest request body accepted, in bytes; larger ones get 413 "
        f"(default {DEFAULT_MAX_REQUEST_BYTES})",
    )
    # The same flag as the core's (service/config.py): `serve` resolves the two into one.
    parser.add_argument(
        "--api-key",
        dest="api_keys",
        action="append",
        default=None,
        help=f"accepted API key (repeatable; env {API_KEY_ENV}, comma-separated); "
        "clients send `Authorization: Bearer KEY`. Default: no key required",
    )

    parser.add_argument(
        "--shutdown-grace-secs",
        type=float,
        default=DEFAULT_SHUTDOWN_GRACE_SECS,
        help="on SIGTERM, seconds running requests get to finish before they are cancelled "
        f"(default {DEFAULT_SHUTDOWN_GRACE_SECS:g})",
    )


def add_core_channel_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of the façade's channel to a separate core (`facade` only)."""
    parser.add_argument(
        "--core-tls-ca",
        type=Path,
        default=None,
        help="PEM root certificates: reach the core over TLS, verified against them",
    )


def facade_settings_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> FacadeSettings:
    """Builds the frozen façade settings from parsed flags and the environment."""
    from_env = [k.strip() for k in env.get(API_KEY_ENV, "").split(",") if k.strip()]
    return FacadeSettings(
        host=args.host,
        port=args.port,
        max_request_bytes=args.max_request_bytes,
        api_keys=tuple(dict.fromkeys([*(args.api_keys or []), *from_env])),
        core_tls_ca=getattr(args, "core_tls_ca", None),
        shutdown_grace_secs=args.shutdown_grace_secs,
    )
