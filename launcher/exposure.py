"""Startup warnings for listeners reachable beyond this machine without a key or TLS."""

from __future__ import annotations

import ipaddress
import logging

log = logging.getLogger("mlx_responses")


def is_loopback(host: str) -> bool:
    """Whether `host` binds loopback only ("localhost", 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def warn_if_exposed(what: str, host: str, has_key: bool, has_tls: bool | None = None) -> None:
    """Logs a warning when `host` is beyond loopback and nothing keeps strangers out."""
    if is_loopback(host):
        return
    if not has_key:
        log.warning(
            "%s binds %s without an API key: anyone who can reach it can use it "
            "(set --api-key or MLX_RESPONSES_API_KEY)",
            what,
            host,
        )
    if has_tls is False:
        log.warning(
            "%s binds %s without TLS: keys and prompts cross the network in clear text "
            "(set --grpc-tls-cert/--grpc-tls-key)",
            what,
            host,
        )
