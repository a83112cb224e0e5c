"""`GET /v1/responses` upgraded to a WebSocket: OpenAI's Responses WebSocket mode.

The client sends `response.create` messages (a create body; `stream` is implicit, `background`
is refused) and receives the events a streamed create sends, as one JSON message each.
Requests with the same `stream_id` run one after another (FIFO), lanes run side by side.
The last response of each lane is kept in memory, so a `store: false` turn chains by
`previous_response_id` on this socket. Closing the socket cancels what is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web
from mlx_responses.http_facade.kit.core_pool import CorePool
from mlx_responses.http_facade.kit.errors import (
    REASON_TABLE,
    REQUEST_TOO_LARGE,
    OpenAIError,
    invalid,
)
from mlx_responses.http_facade.kit.json_body import parse_text
from mlx_responses.http_facade.responses.beta_features import check_compaction_trigger
from mlx_responses.http_facade.responses.from_proto import event_to_json
from mlx_responses.http_facade.responses.to_proto import params_from_json

from mlx_responses.v1 import events_pb2 as ev

log = logging.getLogger(__name__)


class OpenSockets:
    """The sockets open now (weakly held), so a shutdown closes them."""

    def __init__(self) -> None:
        self.sockets: weakref.WeakSet[web.WebSocketResponse] = weakref.WeakSet()


SOCKETS = web.AppKey("websockets", OpenSockets)
MAX_MESSAGE = web.AppKey("websocket_max_message", int)
# A message over the limit gets a 413 error event (the socket goes on), as a body gets a 413;
# aiohttp itself closes the socket (1009) only past this many times the limit.
HARD_MESSAGE_FACTOR = 4
HEARTBEAT_S = 30.0
GOING_AWAY = 1001
CREATE = "response.create"
# Bounds on what one socket may ask at once (the core's own queue bounds the generations).
MAX_LANES = 32
MAX_QUEUED_PER_LANE = 32
# The terminal events of a response.
TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
# A response a next turn can chain on (a failed one leaves nothing, as on OpenAI's API).
CHAINABLE = {"completed", "incomplete"}


@dataclass
class _Chain:
    """A store: false response kept on the socket: what a next turn chains on."""

    response_id: str
    # The stored response the chain starts from (None: the items are the whole history).
    base: str | None
    items: list[Any]


@dataclass
class _Lane:
    """One `stream_id`: its queue of requests, worked FIFO by one task."""

    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None


class ResponsesSocket:
    """One client socket: reads messages, runs each lane's requests, writes their events."""

    def __init__(self, request: web.Request, ws: web.WebSocketResponse, cores: CorePool) -> None:
        self._request = request
        self._ws = ws
        self._cores = cores  # each response.create is routed on its own (--core-routing)
        self._lanes: dict[str | None, _Lane] = {}
        self._chains: dict[str | None, _Chain] = {}  # the last store: false response per lane
        self._send_lock = asyncio.Lock()

    async def run(self) -> None:
        """Reads until the client closes; then cancels every lane still running."""
        try:
            async for message in self._ws:
                if message.type == WSMsgType.TEXT:
                    await self._receive(message.data)
                elif message.type == WSMsgType.BINARY:
                    await self._receive(message.data.decode("utf-8", "replace"))
                elif message.type == WSMsgType.ERROR:
                    break
        finally:
            for lane in self._lanes.values():
                if lane.task is not None:
                    lane.task.cancel()
            tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _send(self, payload: dict[str, Any]) -> None:
        async with self._send_lock:
            if not self._ws.closed:
                await self._ws.send_str(json.dumps(payload, separators=(",", ":")))

    async def _error(self, error: OpenAIError, stream_id: str | None) -> None:
        body = error.body()["error"]
        payload: dict[str, Any] = {"type": "error", "status": error.status, "error": body}
        if stream_id is not None:
            payload["stream_id"] = stream_id
        await self._send(payload)

    async def _receive(self, data: str) -> None:
        bound = self._request.app[MAX_MESSAGE]
        if len(data) > bound // 4 and len(data.encode("utf-8", "surrogatepass")) > bound:
            message = f"The message exceeds the limit of {bound} bytes."
            await self._error(OpenAIError(REQUEST_TOO_LARGE, message), None)
            return
        try:
            message = parse_text(data)  # the bounds a body has: depth, NaN, lone surrogates
        except OpenAIError as error:
            await self._error(error, None)
            return
        if not isinstance(message, dict):
            await self._error(invalid("A message must be a JSON object.", None), None)
            return
        stream_id = message.get("stream_id")
        if stream_id is not None and not isinstance(stream_id, str):
            await self._error(invalid("'stream_id' must be a string.", "stream_id"), None)
            return
        if message.get("type") != CREATE:
            kind = message.get("type")
            await self._error(
                invalid(
                    f"Unsupported message type {kind!r}: this server takes 'response.create'.",
                    "type",
                    "invalid_value",
                ),
                stream_id,
            )
            return
        if stream_id not in self._lanes and len(self._lanes) >= MAX_LANES:
            await self._error(
                invalid(f"At most {MAX_LANES} stream_id lanes per socket.", "stream_id"), stream_id
            )
            return
        lane = self._lanes.setdefault(stream_id, _Lane())
        if lane.queue.qsize() >= MAX_QUEUED_PER_LANE:
            limit = OpenAIError(
                REASON_TABLE["RATE_LIMITED"],
                f"At most {MAX_QUEUED_PER_LANE} requests may wait on one stream_id lane.",
            )
            await self._error(limit, stream_id)
            return
        await lane.queue.put(message)
        if lane.task is None:
            lane.task = asyncio.create_task(self._work(stream_id, lane))

    async def _work(self, stream_id: str | None, lane: _Lane) -> None:
        while True:
            message = await lane.queue.get()
            try:
                await self._create(stream_id, message)
            except OpenAIError as error:
                self._chains.pop(stream_id, None)  # a failed turn leaves nothing to chain on
                await self._error(error, stream_id)
            except Exception as exc:  # a bug: logged once, the socket goes on
                log.exception("websocket request failed")
                self._chains.pop(stream_id, None)
                failure = OpenAIError(
                    REASON_TABLE["INTERNAL"], f"Internal error: {type(exc).__name__}"
                )
                await self._error(failure, stream_id)

    def _expand(self, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The body with a socket-kept chain spelled out; the id the client chained on."""
        chained = body.get("previous_response_id")
        chain = next((c for c in self._chains.values() if c.response_id == chained), None)
        if chain is None:
            return body, None
        new_input = body.get("input", [])
        if isinstance(new_input, str):
            new_input = [{"role": "user", "content": new_input}]
        if not isinstance(new_input, list):
            return body, None  # params_from_json names the problem
        expanded = {**body, "input": [*chain.items, *new_input]}
        expanded.pop("previous_response_id")
        if chain.base is not None:
            expanded["previous_response_id"] = chain.base
        return expanded, str(chained)

    async def _create(self, stream_id: str | None, message: dict[str, Any]) -> None:
        body = {k: v for k, v in message.items() if k not in ("type", "stream_id", "generate")}
        if body.get("background"):
            raise invalid("'background' is not supported over WebSocket.", "background")
        body.pop("stream", None)
        expanded, chained = self._expand(body)
        params = params_from_json(expanded)
        params.stream = True
        generate = message.get("generate")
        if generate is not None:
            if not isinstance(generate, bool):
                raise invalid("Invalid type for 'generate': expected a boolean.", "generate")
            params.generate = generate
        check_compaction_trigger(self._request, params)
        client, key = self._cores.route(params)
        stream = client.stream(params)
        try:
            first = await stream.first()
            opened = next((e.snapshot.response.id for e in first if e.HasField("snapshot")), "")
            if opened:
                self._cores.created(key, opened)
            final = await self._forward(first, stream_id, chained)
            async for batch in stream.rest():
                final = await self._forward(batch, stream_id, chained) or final
        finally:
            stream.cancel()
        if final is not None and final["status"] in CHAINABLE and not final["store"]:
            history = expanded.get("input", [])
            if isinstance(history, str):
                history = [{"role": "user", "content": history}]
            self._chains[stream_id] = _Chain(
                final["id"], params.previous_response_id or None, [*history, *final["output"]]
            )
        else:
            self._chains.pop(stream_id, None)

    async def _forward(
        self, batch: list[ev.ResponseEvent], stream_id: str | None, chained: str | None
    ) -> dict[str, Any] | None:
        """Sends a batch; returns the terminal response, if the batch ends the response."""
        final = None
        for event in batch:
            payload = event_to_json(event)
            if "response" in payload and chained is not None:
                payload["response"]["previous_response_id"] = chained
            if stream_id is not None:
                payload["stream_id"] = stream_id
            await self._send(payload)
            if payload["type"] in TERMINAL:
                final = payload["response"]
        return final


async def responses_socket(request: web.Request, cores: CorePool) -> web.StreamResponse:
    """`GET /v1/responses` with an Upgrade: the socket; without one, 405 as before."""
    hard = HARD_MESSAGE_FACTOR * request.app[MAX_MESSAGE]
    ws = web.WebSocketResponse(heartbeat=HEARTBEAT_S, max_msg_size=hard)
    if not ws.can_prepare(request).ok:
        raise web.HTTPMethodNotAllowed("GET", ["POST"])
    await ws.prepare(request)
    sockets = request.app[SOCKETS].sockets
    sockets.add(ws)
    try:
        await ResponsesSocket(request, ws, cores).run()
    finally:
        sockets.discard(ws)
        await ws.close()
    return ws


async def close_sockets(app: web.Application) -> None:
    """On shutdown: tell every client the server is going away (their lanes are cancelled)."""
    for ws in list(app[SOCKETS].sockets):
        with contextlib.suppress(Exception):
            await ws.close(code=GOING_AWAY, message=b"server shutting down")


def install_websockets(app: web.Application, max_message_bytes: int) -> None:
    """Keeps the open sockets, so a shutdown closes them; messages are capped like bodies."""
    app[SOCKETS] = OpenSockets()
    app[MAX_MESSAGE] = max_message_bytes
    app.on_shutdown.append(close_sockets)
