"""How busy a core is, as this façade sees it: its generation calls in flight."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

# The calls that occupy a core's engine until they end (background jobs return at once and
# are not counted: the core's own queue bounds them).
GENERATION_METHODS = ("/CreateResponse", "/StreamResponse", "/CompactResponse")


def _generates(details: grpc.aio.ClientCallDetails) -> bool:
    method = details.method
    name = method.decode() if isinstance(method, bytes) else str(method)
    return name.endswith(GENERATION_METHODS)


class LoadCounter:
    """Counts one channel's generation calls in flight, through the two interceptors it gives
    (grpc.aio files an interceptor under one call kind only)."""

    def __init__(self) -> None:
        self.in_flight = 0

    def interceptors(self) -> list[grpc.aio.ClientInterceptor]:
        return [_Unary(self), _Streamed(self)]

    def _release(self, _call: Any) -> None:
        self.in_flight -= 1

    async def counted(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        if not _generates(details):
            return await continuation(details, request)
        self.in_flight += 1
        try:
            call = await continuation(details, request)
        except BaseException:
            self.in_flight -= 1
            raise
        call.add_done_callback(self._release)
        return call


class _Unary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, counter: LoadCounter) -> None:
        self._counter = counter

    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        return await self._counter.counted(continuation, client_call_details, request)


class _Streamed(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, counter: LoadCounter) -> None:
        self._counter = counter

    async def intercept_unary_stream(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        return await self._counter.counted(continuation, client_call_details, request)
