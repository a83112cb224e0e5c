"""Frozen settings of the HTTP façade, read once from flags (and the environment) at startup.

The flags themselves (names, defaults, variables, help) are declared once in service/flags.py,
a standard-library-only module the façade may import (tests/unit/test_layering.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mlx_responses.service import flags as F

DEFAULT_MAX_REQUEST_BYTES: int = F.MAX_REQUEST_BYTES.default
# A body becomes one gRPC message (about its size as a proto); the core's message limit caps it.
MAX_REQUEST_BYTES_CEILING = 64 * 1024 * 1024


class FacadeConfigError(ValueError):
    """A façade setting that cannot start the server."""


@dataclass(frozen=True)
class FacadeSettings:
    """Everything the façade needs to start, fixed at startup and passed down."""

    host: str = F.HOST.default
    port: int = F.PORT.default
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    # Never in a repr (settings may be logged): keys are secrets.
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    core_tls_ca: Path | None = F.CORE_TLS_CA.default
    shutdown_grace_secs: float = F.SHUTDOWN_GRACE_SECS.default
    core_routing: str = F.CORE_ROUTING.default

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


def facade_settings_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> FacadeSettings:
    """Builds the frozen façade settings from parsed flags and the environment."""
    return FacadeSettings(
        host=args.host,
        port=args.port,
        max_request_bytes=args.max_request_bytes,
        api_keys=F.api_keys_from(args.api_keys, env),
        core_tls_ca=getattr(args, "core_tls_ca", None),
        shutdown_grace_secs=args.shutdown_grace_secs,
        core_routing=getattr(args, "core_routing", F.CORE_ROUTING.default),
    )
