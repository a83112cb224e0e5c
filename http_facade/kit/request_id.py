"""Request ids: `x-request-id` taken or generated, on every response, log line and core call."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import grpc
from aiohttp import web

HEADER = "x-request-id"
# A client's id is kept when it is short and plain; anything else is replaced, not refused.
VALID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")
REQUEST_ID: ContextVar[str | None] = ContextVar("http_request_id", default=None)
KEY = web.RequestKey("request_id", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

QUIET_PATHS = frozenset({"/health", "/metrics"})

access = logging.getLogger("mlx_responses.http_facade.access")


def current() -> str | None:
    """The id of the request being handled in this context, if any."""
    return REQUEST_ID.get()


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex}"


def request_id_of(request: web.Request) -> str:
    """The client's id when it sent a usable one, else a fresh one."""
    given = request.headers.get(HEADER, "")
    return given if VALID.fullmatch(given) else new_request_id()


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Binds the id to this request's context and writes one access line when it ends."""
    request_id = request[KEY] = request_id_of(request)
    token = REQUEST_ID.set(request_id)
    started = time.perf_counter()
    status: int | str = "cancelled"
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        # Probes and scrapes arrive every few seconds: they log at DEBUG.
        level = logging.DEBUG if request.path in QUIET_PATHS else logging.INFO
        access.log(
            level,
            "%s %s %s %.3fs",
            request.method,
            request.path,
            status,
            time.perf_counter() - started,
        )
        REQUEST_ID.reset(token)


async def _set_header(request: web.Request, response: web.StreamResponse) -> None:
    # on_response_prepare runs before headers leave, streamed (SSE) responses included.
    request_id = request.get(KEY)
    if request_id is not None:
        response.headers[HEADER] = request_id


def install_request_ids(app: web.Application) -> None:
    """Makes the request-id middleware the outermost and stamps every response."""
    app.middlewares.insert(0, request_id_middleware)
    app.on_response_prepare.append(_set_header)


def _with_request_id(details: Any) -> Any:
    request_id = REQUEST_ID.get()
    if request_id is None:
        return details
    metadata = [*(details.metadata or ()), (HEADER, request_id)]
    return details._replace(metadata=metadata)


class _UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        return await continuation(_with_request_id(client_call_details), request)


class _UnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        return await continuation(_with_request_id(client_call_details), request)


def request_id_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """Pass the current request id to the core as `x-request-id` gRPC metadata.

    NOTE: one object per call kind: grpc.aio files an interceptor under its first matching kind.
    """
    return [_UnaryUnary(), _UnaryStream()]
