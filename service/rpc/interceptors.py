"""The one place that turns domain errors into gRPC statuses with google.rpc ErrorInfo."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from grpc_status import rpc_status
from mlx_responses.service.errors import Reason, ServiceError, to_rpc_status

log = logging.getLogger(__name__)

OWN_SERVICES = "/mlx_responses."


async def _abort(context: grpc.aio.ServicerContext[Any, Any], error: ServiceError) -> None:
    status = rpc_status.to_status(to_rpc_status(error))
    await context.abort(status.code, status.details, status.trailing_metadata)


async def _unexpected(
    context: grpc.aio.ServicerContext[Any, Any], exc: BaseException, method: str
) -> None:
    if isinstance(exc, NotImplementedError):
        # Generated base classes raise this for RPCs whose issue has not landed yet.
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not implemented yet")
    log.exception("unexpected error in %s", method)
    await _abort(
        context, ServiceError(Reason.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
    )


def refusing_handler(handler: grpc.RpcMethodHandler, error: ServiceError) -> grpc.RpcMethodHandler:
    """A handler of `handler`'s kind that aborts every call with `error` (and its ErrorInfo)."""
    status = rpc_status.to_status(to_rpc_status(error))

    async def refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(status.code, status.details, status.trailing_metadata)

    async def refuse_stream(
        request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        # A generator, as a streaming behaviour must be for the interceptors wrapping it.
        await context.abort(status.code, status.details, status.trailing_metadata)
        yield  # never reached: abort raises

    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(refuse, **kwargs)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(refuse_stream, **kwargs)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(refuse, **kwargs)
    return grpc.stream_stream_rpc_method_handler(refuse_stream, **kwargs)


UnaryBehaviour = Callable[[Any, "grpc.aio.ServicerContext[Any, Any]"], Awaitable[Any]]
StreamBehaviour = Callable[[Any, "grpc.aio.ServicerContext[Any, Any]"], AsyncIterator[Any]]


def wrap_handler(
    handler: grpc.RpcMethodHandler,
    unary: Callable[[UnaryBehaviour], UnaryBehaviour],
    stream: Callable[[StreamBehaviour], StreamBehaviour],
) -> grpc.RpcMethodHandler:
    """`handler` with its unary or server-streaming behaviour wrapped; other kinds unchanged."""
    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), **kwargs)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(stream(handler.unary_stream), **kwargs)
    return handler


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """Wraps every handler so ServiceError and unexpected errors abort with ErrorInfo."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(OWN_SERVICES):
            # Health and reflection raise no ServiceError, and Health.Watch writes through the
            # context instead of yielding, which the stream wrapper below cannot carry.
            return handler

        def guard_unary(inner: UnaryBehaviour) -> UnaryBehaviour:
            async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                try:
                    return await inner(request, context)
                except ServiceError as error:
                    await _abort(context, error)
                except (grpc.aio.AbortError, asyncio.CancelledError):
                    raise
                except BaseException as exc:
                    # Any other failure is answered, a native library's panic (pyo3's
                    # PanicException, a BaseException) included; the process's own exits are not.
                    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                        raise
                    await _unexpected(context, exc, method)

            return unary

        def guard_stream(inner: StreamBehaviour) -> StreamBehaviour:
            async def stream(
                request: Any, context: grpc.aio.ServicerContext[Any, Any]
            ) -> AsyncIterator[Any]:
                try:
                    async for message in inner(request, context):
                        yield message
                except ServiceError as error:
                    await _abort(context, error)
                except (grpc.aio.AbortError, asyncio.CancelledError):
                    raise
                except BaseException as exc:
                    # Any other failure is answered, a native library's panic (pyo3's
                    # PanicException, a BaseException) included; the process's own exits are not.
                    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                        raise
                    await _unexpected(context, exc, method)

            return stream

        return wrap_handler(handler, guard_unary, guard_stream)
