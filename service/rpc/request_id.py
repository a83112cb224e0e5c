"""The request id of the RPC being served: from `x-request-id` metadata, else generated; and
its fan-out (`x-fan-out`: the choices of one HTTP request, admitted as one unit: fan_out.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import grpc
from mlx_responses.service.fan_out import FAN_OUT, parse_fan_out
from mlx_responses.service.fan_out import METADATA_KEY as FAN_OUT_KEY
from mlx_responses.service.rpc.interceptors import (
    OWN_SERVICES,
    StreamBehaviour,
    UnaryBehaviour,
    wrap_handler,
)

METADATA_KEY = "x-request-id"
MAX_LENGTH = 128
REQUEST_ID: ContextVar[str | None] = ContextVar("rpc_request_id", default=None)


def current() -> str | None:
    """The id of the RPC handled in this context (background jobs inherit their creator's)."""
    return REQUEST_ID.get()


def _request_id(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == METADATA_KEY and isinstance(value, str) and 0 < len(value) <= MAX_LENGTH:
            return value
    return f"rpc_{uuid.uuid4().hex}"


def _bind(context: grpc.aio.ServicerContext[Any, Any]) -> None:
    # NOTE: never reset: each RPC runs in a task (and a context) of its own.
    REQUEST_ID.set(_request_id(context))
    for key, value in context.invocation_metadata() or ():
        if key == FAN_OUT_KEY and isinstance(value, str):
            FAN_OUT.set(parse_fan_out(value))


def _bind_unary(inner: UnaryBehaviour) -> UnaryBehaviour:
    async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        _bind(context)
        return await inner(request, context)

    return unary


def _bind_stream(inner: StreamBehaviour) -> StreamBehaviour:
    async def stream(
        request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        _bind(context)
        async for message in inner(request, context):
            yield message

    return stream


class RequestIdInterceptor(grpc.aio.ServerInterceptor):
    """Binds each RPC's request id to the handler's context, for its log lines."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or not handler_call_details.method.startswith(OWN_SERVICES):
            # Health and reflection log nothing per request, and Health.Watch writes through
            # the context instead of yielding.
            return handler
        return wrap_handler(handler, _bind_unary, _bind_stream)
