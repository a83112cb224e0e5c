"""Requests aiohttp's HTTP parser refuses: answered in the OpenAI envelope, logged quietly.

A malformed request (a 100 kB header, CR/LF/NUL in a header, Content-Length with
Transfer-Encoding, an encoding aiohttp cannot decode) never reaches the app's middleware:
aiohttp answers it from `RequestHandler.handle_error` with plain text and logs an ERROR with a
traceback, so any client could fill the log. The façade's server builds request handlers whose
`handle_error` answers in the envelope and logs such refusals at INFO, at most a few a minute,
then close the connection lingering, as servers do after refusing a request whose client may still
be sending it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from mlx_responses.http_facade.kit.body import unsupported_encoding
from mlx_responses.http_facade.kit.errors import (
    BAD_HTTP_REQUEST,
    FALLBACK,
    OpenAIError,
    anthropic_error_body,
    speaks_anthropic,
)
from mlx_responses.http_facade.kit.hangups import SparingRequestHandler, giving_fates

log = logging.getLogger(__name__)

REFUSALS_PER_WINDOW = 10
WINDOW_S = 60.0
# How long a connection whose request was refused reads and drops what its client still sends.
LINGER_S = 5.0
REQUEST_LINE = re.compile(rb"[A-Z]{3,7} (/[^ \r\n]{0,2048}) HTTP/1\.[01]\r?\n")


@dataclass
class RateLimit:
    """At most `burst` events per `window` seconds; counts the ones it drops."""

    burst: int = REFUSALS_PER_WINDOW
    window: float = WINDOW_S
    clock: Any = time.monotonic
    _start: float = field(default=-1e18, init=False)
    _seen: int = field(default=0, init=False)
    dropped: int = field(default=0, init=False)

    def allow(self) -> tuple[bool, int]:
        """Whether this event may be logged, and how many were dropped since the last one."""
        now = self.clock()
        if now - self._start >= self.window:
            self._start, self._seen = now, 0
        self._seen += 1
        if self._seen > self.burst:
            self.dropped += 1
            return False, 0
        dropped, self.dropped = self.dropped, 0
        return True, dropped


def refusal_of(status: int, exc: BaseException | None, message: str | None) -> OpenAIError:
    """The envelope for what aiohttp refused (or a 500 it caught)."""
    if isinstance(exc, ContentEncodingError):
        return unsupported_encoding("(as sent)")
    if status >= 500:
        return OpenAIError(FALLBACK, "internal error")
    text = (message or getattr(exc, "message", None) or "Bad request").strip()
    return OpenAIError(BAD_HTTP_REQUEST, f"Malformed HTTP request: {text}")


class EnvelopeRequestHandler(SparingRequestHandler):
    """aiohttp's request handler, answering its own refusals in the envelope (and sparing the
    handlers that outlive their client: http_facade/kit/hangups.py)."""

    refusals = RateLimit()
    _refused = False
    _last_path = "/"

    def data_received(self, data: bytes) -> None:
        # The path of the request line a chunk starts with: a request aiohttp's parser refuses
        # reaches handle_error without one, and its error envelope depends on the API.
        line = REQUEST_LINE.match(data)
        if line is not None:
            self._last_path = line.group(1).decode("latin-1")
        super().data_received(data)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
        else:
            self._refused = True
            allowed, dropped = self.refusals.allow()
            if allowed:
                log.info(
                    "refused a malformed HTTP request from %s: %s%s",
                    request.remote,
                    type(exc).__name__ if exc is not None else status,
                    f" ({dropped} more not logged)" if dropped else "",
                )
        if request.writer.output_size > 0:
            # Some of a response already left: the connection is broken (as aiohttp does).
            raise ConnectionError("Response is sent already, cannot send another response")
        error = refusal_of(status, exc, message)
        # A request the parser refused has no path (aiohttp says "/"): the last request line's.
        path = request.path if request.path != "/" else self._last_path.split("?", 1)[0]
        body = anthropic_error_body(error) if speaks_anthropic(path) else error.body()
        response = web.json_response(body, status=error.status)
        response.force_close()
        return response

    async def finish_response(
        self, request: BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        answered = await super().finish_response(request, resp, start_time)
        if self._refused and self.transport is not None:
            self._linger(self.transport)
        return answered

    def _linger(self, transport: asyncio.Transport) -> None:
        """Close after a refusal without losing the answer: closing a socket with unread input
        makes the kernel reset the connection, and the reset can reach a client still sending
        (a 100 kB header) before it reads the answer. So stop parsing, send FIN after the answer,
        and drop what still comes until the client's FIN (`eof_received` lets the transport
        close) or LINGER_S."""
        self.close()  # data_received drops what still arrives
        self.transport = None  # start() leaves the socket to the linger
        if transport.can_write_eof():
            transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER_S, transport.close)


class EnvelopeServer(web.Server):
    """A low-level server whose connections use EnvelopeRequestHandler."""

    def __call__(self) -> RequestHandler:
        return EnvelopeRequestHandler(self, loop=self._loop, **self._kwargs)


class FacadeRunner(web.AppRunner):
    """An AppRunner serving through EnvelopeServer."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return EnvelopeServer(
            server.request_handler,
            request_factory=giving_fates(server.request_factory),
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            **server._kwargs,
        )
