"""API keys at the façade: `Authorization: Bearer KEY` (or `x-api-key`) checked, then forwarded."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Collection, Sequence
from contextvars import ContextVar
from typing import Any

import grpc
from aiohttp import web
from aiohttp.typedefs import Middleware
from mlx_responses.http_facade.kit.errors import INVALID_API_KEY, MISSING_API_KEY, OpenAIError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The caller's key, for the core calls its handler makes (contextvars follow asyncio tasks).
FORWARDED_KEY: ContextVar[str | None] = ContextVar("forwarded_api_key", default=None)


def bearer_token(header: str | None) -> str | None:
    """The token of `Bearer TOKEN`; None when absent or not printable ASCII (no gRPC metadata)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    if not (token.isascii() and token.isprintable()):
        return None
    return token


def api_key_header(header: str | None) -> str | None:
    """Anthropic's `x-api-key: KEY`, held to the same printable-ASCII rule as a bearer token."""
    token = (header or "").strip()
    return token if token and token.isascii() and token.isprintable() else None


def request_key(request: web.Request) -> str | None:
    """The caller's key: `Authorization: Bearer KEY`, else `x-api-key: KEY` (Anthropic clients)."""
    return bearer_token(request.headers.get("Authorization")) or api_key_header(
        request.headers.get("x-api-key")
    )


def key_matches(token: str, keys: Sequence[str]) -> bool:
    """Constant-time comparison against every key (no early exit on a match either)."""
    candidate = token.encode()
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(candidate, key.encode())
    return matched


def auth_middleware(keys: Sequence[str], open_paths: Collection[str] = ()) -> Middleware:
    """Refuses requests without a configured key (when keys are set), but to `open_paths`;
    forwards the caller's key."""
    accepted = tuple(keys)
    opened = frozenset(open_paths)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        token = request_key(request)
        if accepted and request.path not in opened:
            if token is None:
                raise OpenAIError(
                    MISSING_API_KEY,
                    "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                )
            if not key_matches(token, accepted):
                # NOTE: OpenAI echoes a masked key; this server never echoes any part of it.
                raise OpenAIError(INVALID_API_KEY, "Incorrect API key provided.")
        reset = FORWARDED_KEY.set(token)
        try:
            return await handler(request)
        finally:
            FORWARDED_KEY.reset(reset)

    return middleware


def _with_key(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    token = FORWARDED_KEY.get()
    if token is None:
        return details
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    metadata.add("authorization", f"Bearer {token}")
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class ForwardKeyUnary(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds the calling request's key as `authorization` metadata to unary core calls."""

    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_key(client_call_details), request)


class ForwardKeyStream(grpc.aio.UnaryStreamClientInterceptor):
    """The same for server-streaming calls.

    NOTE: one class per kind: grpc.aio files an interceptor under its first matching kind only.
    """

    async def intercept_unary_stream(
        self, continuation: Any, client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_key(client_call_details), request)


def forwarding_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """The interceptors a core channel needs to forward the caller's key on every call."""
    return [ForwardKeyUnary(), ForwardKeyStream()]
