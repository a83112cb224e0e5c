"""Frozen settings of the HTTP façade, read once from flags (and the environment) at startup."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
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

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise FacadeConfigError("--port must be between 0 and 65535")
        if not 1 <= self.max_request_bytes <= MAX_REQUEST_BYTES_CEILING:
            raise FacadeConfigError(
                f"--max-request-bytes must be between 1 and {MAX_REQUEST_BYTES_CEILING}"
            )


def add_facade_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """Adds the façade's flags (`serve` and `facade` both take them)."""
    del env  # no façade flag reads the environment yet
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


def facade_settings_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> FacadeSettings:
    """Builds the frozen façade settings from parsed flags and the environment."""
    del env
    return FacadeSettings(host=args.host, port=args.port, max_request_bytes=args.max_request_bytes)
