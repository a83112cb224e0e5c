"""Requests aiohttp's HTTP parser refuses: answered in the OpenAI envelope, logged quietly.

A malformed request (a 100 kB header, CR/LF/NUL in a header, Content-Length with
Transfer-Encoding, an encoding aiohttp cannot decode) never reaches the app's middleware:
aiohttp answers it from `RequestHandler.handle_error` with plain text and logs an ERROR with a
traceback, so any client could fill the log. The façade's server builds request handlers whose
`handle_error` answers in the envelope and logs such refusals at INFO, at most a few a minute.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from mlx_responses.http_facade.body import unsupported_encoding
from mlx_responses.http_facade.errors import BAD_HTTP_REQUEST, FALLBACK, OpenAIError

log = logging.getLogger(__name__)

REFUSALS_PER_WINDOW = 10
WINDOW_S = 60.0


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


class EnvelopeRequestHandler(RequestHandler):
    """aiohttp's request handler, answering its own refusals in the envelope."""

    refusals = RateLimit()

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
        response = web.json_response(error.body(), status=error.status)
        response.force_close()
        return response


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
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            **server._kwargs,
        )
