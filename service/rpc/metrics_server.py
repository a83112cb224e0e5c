"""The core's own Prometheus endpoint (`--metrics-port`): GET /metrics on the event loop.

It takes the gRPC port's protection: with API keys it wants `Authorization: Bearer KEY` (a
scrape config's `authorization: {credentials: KEY}`), with a TLS certificate it speaks HTTPS.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware
from mlx_responses.service.config import Settings
from mlx_responses.service.core import Core
from mlx_responses.service.envelope import INVALID_API_KEY, MISSING_API_KEY, OpenAIError
from mlx_responses.service.rpc.auth import bearer, key_matches
from prometheus_client import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _unauthorized(missing: bool) -> web.Response:
    """401 in the OpenAI envelope, as the façade answers (a wrong key is never echoed)."""
    if missing:
        error = OpenAIError(MISSING_API_KEY, "No API key: send it as `Authorization: Bearer KEY`.")
    else:
        error = OpenAIError(INVALID_API_KEY, "Incorrect API key provided.")
    return web.json_response(
        error.body(), status=error.status, headers={"WWW-Authenticate": "Bearer"}
    )


def _keys_middleware(keys: tuple[str, ...]) -> Middleware:
    """Refuses every request without one of `keys` (the endpoint has no open route)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        token = bearer(request.headers.get("Authorization"))
        if token is None or not key_matches(token, keys):
            return _unauthorized(token is None)
        return await handler(request)

    return middleware


def _tls(settings: Settings) -> ssl.SSLContext | None:
    """The gRPC port's certificate and key, as an HTTPS context (None without TLS)."""
    if settings.grpc_tls_cert is None or settings.grpc_tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.grpc_tls_cert, settings.grpc_tls_key)
    return context


async def start_metrics_server(core: Core, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serves the core's metrics on host:port (0 picks one); returns the runner and the port.

    NOTE: on the core's own loop, not prometheus_client's thread server, so the state gauges
    read the stores and jobs on the thread that owns them.
    """

    async def metrics(request: web.Request) -> web.Response:
        body = await core.metrics.render()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    keys = core.settings.api_keys
    app = web.Application(middlewares=[_keys_middleware(keys)] if keys else [])
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tls = _tls(core.settings)
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    bound = int(sockets[0].getsockname()[1]) if sockets else port
    scheme = "https" if tls is not None else "http"
    log.info(
        "core metrics on %s://%s:%d/metrics%s",
        scheme,
        host,
        bound,
        " (API key required)" if keys else "",
    )
    return runner, bound
