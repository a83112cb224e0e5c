"""What a client that hangs up does to its handler: cancel it, or leave it to finish.

aiohttp (`handler_cancellation`) cancels a handler, and poisons its unread body, the moment its
connection is lost. A client that sends a whole background create and closes its socket at once
thus lost its job (issue #41), against the seed: "Dropping the create connection or a poll
cancels nothing". Here a connection lost once a request's body has fully arrived leaves the
handler running until the handler decides: a background create outlives its client, anything else
follows it (ends at once, as before). Handlers decide at their start (this module's middleware)
unless their route is marked `decides_on_hangup`; a request whose body had not fully arrived is
cancelled as before (it was never read).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

DECIDES = "__decides_on_hangup__"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
H = TypeVar("H", bound=Handler)


class ClientFate:
    """What a lost connection does to one request's handler."""

    def __init__(self, request: BaseRequest) -> None:
        self.request = request
        self.outlives: bool | None = None  # None: not decided yet
        self.gone = False  # the connection was lost and the handler spared

    def spares(self) -> bool:
        """Whether a connection lost now leaves the handler running."""
        if self.outlives is None:
            return self.request.content.is_eof()  # the whole body arrived: the handler decides
        return self.outlives


class SparingRequestHandler(RequestHandler):
    """aiohttp's connection handler, sparing the handler its `ClientFate` spares."""

    fate: ClientFate | None = None  # the running handler's (None once it returned)
    # Spared handlers run on past their connection: held here until they end.
    _spared: ClassVar[set[asyncio.Task[None]]] = set()

    def connection_lost(self, exc: BaseException | None) -> None:
        fate = self.fate
        if self._manager is not None and fate is not None and fate.spares():
            fate.gone = True
            task = self._task_handler
            if task is not None:
                self._spared.add(task)
                task.add_done_callback(self._spared.discard)
            self._task_handler = None  # not cancelled
            self._current_request = None  # its body stays readable
        super().connection_lost(exc)


RequestFactory = Callable[..., BaseRequest]


def giving_fates(factory: RequestFactory) -> RequestFactory:
    """A request factory that gives each request its `ClientFate` on its connection."""

    def make(*args: Any, **kwargs: Any) -> BaseRequest:
        request = factory(*args, **kwargs)
        protocol = request.protocol
        if isinstance(protocol, SparingRequestHandler):
            protocol.fate = ClientFate(request)
        return request

    return make


def _fate(request: web.BaseRequest) -> ClientFate | None:
    fate = getattr(request.protocol, "fate", None)
    return fate if isinstance(fate, ClientFate) and fate.request is request else None


def decide(request: web.BaseRequest, outlives: bool) -> None:
    """Settles whether the handler outlives its client; one that follows a client already gone
    ends here (cancelled, as aiohttp would have cancelled it)."""
    fate = _fate(request)
    if fate is None:
        return
    fate.outlives = outlives
    if fate.gone and not outlives:
        raise asyncio.CancelledError


def decides_on_hangup(handler: H) -> H:
    """Marks a route's handler as calling `decide` itself, once it has read what it needs."""
    setattr(handler, DECIDES, True)
    return handler


@web.middleware
async def hangup_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every handler follows its client unless its route decides for itself."""
    fate = _fate(request)
    try:
        if not getattr(request.match_info.handler, DECIDES, False):
            decide(request, outlives=False)
        return await handler(request)
    finally:
        # Returned: a connection lost while its answer is written ends it as aiohttp would
        # (and an idle keep-alive connection holds no finished request).
        protocol = request.protocol
        if fate is not None and isinstance(protocol, SparingRequestHandler):
            protocol.fate = None
