"""The aiohttp application factory: routes, the error middleware and the core channel."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import grpc
from aiohttp import web
from mlx_responses.http_facade.anthropic import openapi as anthropic_openapi
from mlx_responses.http_facade.anthropic.routes import add_anthropic_routes
from mlx_responses.http_facade.chat import openapi as chat_openapi
from mlx_responses.http_facade.chat.routes import add_chat_routes
from mlx_responses.http_facade.completions import openapi as completions_openapi
from mlx_responses.http_facade.completions.routes import add_completions_routes
from mlx_responses.http_facade.config import FacadeSettings
from mlx_responses.http_facade.embeddings import openapi as embeddings_openapi
from mlx_responses.http_facade.embeddings.routes import add_embeddings_routes
from mlx_responses.http_facade.kit.auth import auth_middleware
from mlx_responses.http_facade.kit.core_pool import CorePool
from mlx_responses.http_facade.kit.drain import install_drain
from mlx_responses.http_facade.kit.errors import (
    FALLBACK,
    GRPC_TABLE,
    METHOD_NOT_ALLOWED,
    REQUEST_TOO_LARGE,
    RETRY_AFTER_SECS,
    UNKNOWN_ROUTE,
    OpenAIError,
    anthropic_error_body,
    speaks_anthropic,
)
from mlx_responses.http_facade.kit.hangups import hangup_middleware
from mlx_responses.http_facade.kit.metrics import METRICS, MetricsSource, install_metrics
from mlx_responses.http_facade.kit.models import add_model_routes
from mlx_responses.http_facade.kit.openapi_document import ApiPart, install_openapi
from mlx_responses.http_facade.kit.protocol_errors import FacadeRunner
from mlx_responses.http_facade.kit.request_id import install_request_ids
from mlx_responses.http_facade.kit.requests import CORES
from mlx_responses.http_facade.page import PAGE_PATHS, add_page_routes
from mlx_responses.http_facade.responses import openapi as responses_openapi
from mlx_responses.http_facade.responses.conversations import add_conversation_routes
from mlx_responses.http_facade.responses.routes import add_responses_routes
from mlx_responses.http_facade.responses.websocket import install_websockets

log = logging.getLogger(__name__)

# nginx's status for a request whose client left before the answer (the façade's CANCELLED).
CLIENT_CLOSED_REQUEST = GRPC_TABLE[grpc.StatusCode.CANCELLED].status

SETTINGS = web.AppKey("facade_settings", FacadeSettings)
# Open to probes and load balancers, as the core's health service is; and the page (code
# only: what it shows comes from the API, with the key typed into it).
OPEN_PATHS = frozenset({"/health", *PAGE_PATHS})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Each dialect's schemas and operations, in the order /openapi.json lists them.
API_PARTS: tuple[ApiPart, ...] = (
    responses_openapi,
    chat_openapi,
    completions_openapi,
    embeddings_openapi,
    anthropic_openapi,
)


def _error_response(error: OpenAIError, request: web.Request) -> web.Response:
    """The error in the envelope of the API the request spoke (OpenAI's, or Anthropic's); a 503
    carries Retry-After."""
    body = anthropic_error_body(error) if speaks_anthropic(request.path) else error.body()
    response = web.json_response(body, status=error.status)
    if error.status == 503:
        response.headers["Retry-After"] = str(RETRY_AFTER_SECS)
    return response


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure leaves as an OpenAI error envelope; unexpected ones are logged once."""
    try:
        return await handler(request)
    except OpenAIError as error:
        response = _error_response(error, request)
        if request.content.exception() is not None:
            # The body broke mid-read (it did not decode): what is left of it cannot be
            # skipped, so the answer closes the connection and the client opens a new one.
            response.force_close()
        return response
    except web.HTTPException as exc:
        if exc.status == 404:
            kind = UNKNOWN_ROUTE
        elif exc.status == 405:
            kind = METHOD_NOT_ALLOWED
        elif exc.status == 413:
            limit = request.app[SETTINGS].max_request_bytes
            message = f"The request body exceeds the limit of {limit} bytes."
            return _error_response(OpenAIError(REQUEST_TOO_LARGE, message), request)
        else:
            raise
        message = f"{exc.reason}: {request.method} {request.path}"
        response = _error_response(OpenAIError(kind, message), request)
        if "Allow" in exc.headers:  # RFC 9110: a 405 lists the methods the resource allows
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except ConnectionResetError:
        # A stream's client hung up and its transport closed before aiohttp cancelled this
        # handler (any SSE route): an ordinary end, recorded as 499 (client closed request).
        log.info("client left mid-stream on %s %s", request.method, request.path)
        return web.Response(status=CLIENT_CLOSED_REQUEST)
    except Exception as exc:
        log.exception("unexpected error on %s %s", request.method, request.path)
        failure = OpenAIError(FALLBACK, f"internal error: {type(exc).__name__}")
        return _error_response(failure, request)


def _addresses(cores: str | Sequence[str]) -> list[str]:
    return [cores] if isinstance(cores, str) else list(cores)


def create_app(
    core_addresses: str | Sequence[str],
    settings: FacadeSettings | None = None,
    core_metrics: MetricsSource | None = None,
) -> web.Application:
    """The façade app, talking over gRPC to the cores at `core_addresses` (host:port each).

    `core_metrics` renders the core's Prometheus metrics when both run in one process.
    """
    settings = settings or FacadeSettings()
    app = web.Application(
        middlewares=[
            error_middleware,
            hangup_middleware,
            auth_middleware(settings.api_keys, OPEN_PATHS),
        ],
        client_max_size=settings.max_request_bytes,
    )
    app[SETTINGS] = settings
    install_metrics(app, core_metrics)
    install_request_ids(app)
    install_openapi(app, API_PARTS)
    install_drain(app, settings.shutdown_grace_secs)
    install_websockets(app, settings.max_request_bytes)

    async def core_channel(app: web.Application) -> AsyncIterator[None]:
        ca = settings.core_tls_ca.read_bytes() if settings.core_tls_ca is not None else None
        app[CORES] = CorePool.connect(
            _addresses(core_addresses), ca, by_cache=settings.core_routing == "cache"
        )
        await app[CORES].start()
        cores = app[CORES].cores
        app[METRICS].watch_cores(lambda: [(core.address, core.serving) for core in cores])
        yield
        await app[CORES].close()

    app.cleanup_ctx.append(core_channel)
    add_responses_routes(app)
    add_model_routes(app)
    add_chat_routes(app)
    add_completions_routes(app)
    add_embeddings_routes(app)
    add_anthropic_routes(app)
    add_page_routes(app)
    for prefix in ("/v1", ""):
        add_conversation_routes(app, prefix)
    return app


async def start_facade(
    core_addresses: str | Sequence[str],
    settings: FacadeSettings,
    core_metrics: MetricsSource | None = None,
) -> tuple[web.AppRunner, int]:
    """Starts the façade on settings.host:port (0 picks one); returns the runner and the port."""
    host, port = settings.host, settings.port
    # handler_cancellation: a client that disconnects cancels its handler, hence its RPC
    # (unless the handler outlives it: a background create, http_facade/kit/hangups.py).
    # shutdown_timeout: on cleanup, in-flight handlers get the grace (plus the core's own
    # cancel round trip) before aiohttp cancels them.
    runner = FacadeRunner(
        create_app(core_addresses, settings, core_metrics),
        handler_cancellation=True,
        access_log=None,
        shutdown_timeout=settings.shutdown_grace_secs + 5.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = int(sockets[0].getsockname()[1]) if sockets else port
    cores = ", ".join(_addresses(core_addresses))
    log.info("HTTP façade listening on http://%s:%d (cores: %s)", host, bound, cores)
    return runner, bound
