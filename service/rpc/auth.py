"""API keys on the core: `authorization: Bearer KEY` checked on gRPC calls (and --metrics-port)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence

import grpc
from mlx_responses.service.errors import Reason, ServiceError
from mlx_responses.service.rpc.interceptors import refusing_handler

AUTHORIZATION = "authorization"
# Open like the façade's /health: probes and load balancers carry no key.
OPEN_PREFIXES = ("/grpc.health.v1.Health/",)


def bearer(value: str | None) -> str | None:
    """The token of an `authorization` value `Bearer TOKEN`, if it is one."""
    scheme, _, token = (value or "").strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def bearer_token(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The token of an `authorization: Bearer TOKEN` entry, if any."""
    for key, value in metadata or ():
        if key.lower() == AUTHORIZATION and isinstance(value, str) and bearer(value) is not None:
            return bearer(value)
    return None


def key_matches(token: str, keys: Sequence[str]) -> bool:
    """Constant-time comparison against every key (no early exit on a match either)."""
    candidate = token.encode()
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(candidate, key.encode())
    return matched


def _refusal(missing: bool) -> ServiceError:
    if missing:
        return ServiceError(
            Reason.UNAUTHENTICATED,
            "No API key: send it as `authorization: Bearer KEY` call metadata.",
        )
    return ServiceError(Reason.UNAUTHENTICATED, "Incorrect API key provided.")


class ApiKeyInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call but health checks unless it carries one of the configured keys."""

    def __init__(self, keys: Sequence[str]) -> None:
        self._keys = tuple(keys)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method.startswith(OPEN_PREFIXES):
            return handler
        token = bearer_token(handler_call_details.invocation_metadata)  # type: ignore[arg-type]
        if token is not None and key_matches(token, self._keys):
            return handler
        return refusing_handler(handler, _refusal(token is None))
