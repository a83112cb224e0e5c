"""One small handler per endpoint; each translates JSON to a core RPC and back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from aiohttp import web
from mlx_responses.http_facade.kit.client import CoreClient, CoreEventStream
from mlx_responses.http_facade.kit.decode import integer
from mlx_responses.http_facade.kit.drain import SHUTDOWN_MESSAGE, STREAMS, OpenStream
from mlx_responses.http_facade.kit.errors import (
    FALLBACK,
    STREAM_BROKEN_CODE,
    OpenAIError,
    invalid,
)
from mlx_responses.http_facade.kit.hangups import decide, decides_on_hangup
from mlx_responses.http_facade.kit.requests import CORES, core, read_json, remember, routed
from mlx_responses.http_facade.kit.sse import frame, write_stream
from mlx_responses.http_facade.responses.beta_features import check_compaction_trigger
from mlx_responses.http_facade.responses.from_proto import (
    event_to_json,
    item_to_json,
    response_to_json,
    usage_to_json,
)
from mlx_responses.http_facade.responses.item_lists import page_query, page_to_json, query_int
from mlx_responses.http_facade.responses.to_proto import params_from_json
from mlx_responses.http_facade.responses.websocket import responses_socket

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)


@decides_on_hangup
async def create_response(request: web.Request) -> web.StreamResponse:
    """POST /v1/responses: foreground, streamed or background."""
    params = params_from_json(await read_json(request))
    client = routed(request, params)
    check_compaction_trigger(request, params)
    # Seed: dropping the create connection cancels nothing (a background create, once read);
    # a foreground create follows its client, freeing the engine for the next one.
    decide(request, outlives=params.background)
    if params.background:
        # The core refuses background + stream (one place for the rule, gRPC clients too).
        job = await client.create_job(params)
        remember(request, job.id)
        return web.json_response(response_to_json(job))
    if params.stream:
        return await _stream(request, client, client.stream(params))
    response = await client.create(params)
    remember(request, response.id)
    return web.json_response(response_to_json(response))


def _snapshot(batch: list[ev.ResponseEvent]) -> pb.Response | None:
    """The batch's last response snapshot, if any."""
    return next((e.snapshot.response for e in reversed(batch) if e.HasField("snapshot")), None)


def _cancelling() -> bool:
    """Whether this handler itself is being cancelled (the client left, or aiohttp gave up)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _stream(
    request: web.Request, client: CoreClient, stream: CoreEventStream
) -> web.StreamResponse:
    # Refusals (400, 404, 503) arrive before any event: answer them as plain HTTP errors.
    try:
        first = await stream.first()
    except BaseException:
        stream.cancel()
        raise
    opened = _snapshot(first)
    if opened is not None:
        remember(request, opened.id)
    try:
        # A client that hangs up mid-write is the error middleware's (a 499, not a 500).
        return await _write_stream(request, client, stream, first)
    finally:
        stream.cancel()


@dataclass
class _ResponseFrames:
    """A Responses stream's frames (kit/sse.py writes them): each event as `event:` and `data:`;
    a stream the core broke off, or the shutdown cut, ends with a whole response.failed."""

    last: ev.ResponseEvent | None = None
    snapshot: pb.Response | None = None
    failed: bool = False

    def head(self) -> bytes:
        return b""

    def frames(self, index: int, event: ev.ResponseEvent) -> bytes:
        self.last = event
        if event.HasField("snapshot"):
            self.snapshot = event.snapshot.response
        return frame(event_to_json(event))

    def tail(self) -> bytes:
        return b""

    def broken(self, error: OpenAIError) -> bytes:
        self.failed = True
        failed = response_to_json(self.snapshot) if self.snapshot is not None else {}
        failed.update(status="failed", error={"code": STREAM_BROKEN_CODE, "message": error.message})
        sequence = (self.last.sequence_number + 1) if self.last else 0
        return frame({"type": "response.failed", "sequence_number": sequence, "response": failed})


async def _batches(
    first: list[ev.ResponseEvent], stream: CoreEventStream, tracked: OpenStream | None
) -> AsyncGenerator[tuple[int, list[ev.ResponseEvent]], None]:
    yield 0, first
    try:
        async for batch in stream.rest():
            yield 0, batch
    except asyncio.CancelledError:
        # The shutdown drain cut the core call (this handler was not cancelled).
        if tracked is None or not tracked.aborted or _cancelling():
            raise
        raise OpenAIError(FALLBACK, SHUTDOWN_MESSAGE) from None


async def _write_stream(
    request: web.Request,
    client: CoreClient,
    stream: CoreEventStream,
    first: list[ev.ResponseEvent],
) -> web.StreamResponse:
    """Writes the events of an accepted stream (its first batch read already), tracked by its
    response id so a shutdown can end it with a terminal event."""
    render = _ResponseFrames()
    opened = _snapshot(first)
    tracking = (
        request.app[STREAMS].track(opened.id, client, stream)
        if opened is not None
        else contextlib.nullcontext(None)
    )
    with tracking as tracked:
        response = await write_stream(request, _batches(first, stream, tracked), render)
        if tracked is not None:
            tracked.ended_cancelled = render.failed or (
                render.snapshot is not None
                and render.snapshot.status == pb.RESPONSE_STATUS_CANCELLED
            )
    return response


async def open_socket(request: web.Request) -> web.StreamResponse:
    """GET /v1/responses with an Upgrade: the Responses WebSocket mode."""
    return await responses_socket(request, request.app[CORES])


def _flag(request: web.Request, name: str) -> bool:
    raw = request.query.get(name)
    if raw is None or raw.lower() in ("false", "0", ""):
        return False
    if raw.lower() in ("true", "1"):
        return True
    raise invalid(f"Invalid '{name}': expected true or false, but got {raw!r}.", name)


async def get_response(request: web.Request) -> web.StreamResponse:
    """GET /v1/responses/{id}; with `stream=true`, a background response's events
    after `starting_after` (all without it), then live until it ends."""
    response_id = request.match_info["response_id"]
    client = core(request)
    if _flag(request, "stream"):
        after = query_int(request.query, "starting_after")
        return await _stream(request, client, client.stream_job_events(response_id, after))
    response = await client.get_response(response_id)
    return web.json_response(response_to_json(response))


async def list_input_items(request: web.Request) -> web.Response:
    """GET /v1/responses/{id}/input_items."""
    page = await core(request).list_input_items(
        request.match_info["response_id"], page_query(request.query)
    )
    return web.json_response(page_to_json(page))


async def delete_response(request: web.Request) -> web.Response:
    """DELETE /v1/responses/{id}."""
    reply = await core(request).delete_response(request.match_info["response_id"])
    return web.json_response({"id": reply.id, "object": "response", "deleted": reply.deleted})


async def cancel_response(request: web.Request) -> web.Response:
    """POST /v1/responses/{id}/cancel."""
    response = await core(request).cancel(request.match_info["response_id"])
    return web.json_response(response_to_json(response))


async def input_tokens(request: web.Request) -> web.Response:
    """POST /v1/responses/input_tokens."""
    params = params_from_json(await read_json(request))
    count = await routed(request, params).count_input_tokens(params)
    return web.json_response({"object": "response.input_tokens", "input_tokens": count})


async def compact(request: web.Request) -> web.Response:
    """POST /v1/responses/compact."""
    body = await read_json(request)
    params = params_from_json(body)
    keep = body.get("keep_tokens") if isinstance(body, dict) else None
    if keep is not None:
        keep = integer(keep, "keep_tokens")
        if keep < 0:
            raise invalid("Invalid 'keep_tokens': out of range.", "keep_tokens", "invalid_value")
    reply = await routed(request, params).compact(params, keep)
    return web.json_response(
        {
            "id": reply.id,
            "object": "response.compaction",
            "created_at": reply.created_at,
            "model": reply.model,
            "output": [item_to_json(i) for i in reply.output],
            "usage": usage_to_json(reply.usage),
        }
    )


def add_responses_routes(app: web.Application) -> None:
    """Mounts the Responses endpoints under /v1 and bare (seed aliases)."""
    # An id is never one of the fixed names beside it: GET /v1/responses/compact is a 405
    # (Allow: POST), not a lookup of a response named "compact".
    one = "{response_id:(?!compact$|input_tokens$)[^{}/]+}"
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/responses", create_response)
        app.router.add_get(f"{prefix}/responses", open_socket)
        app.router.add_post(f"{prefix}/responses/compact", compact)
        app.router.add_post(f"{prefix}/responses/input_tokens", input_tokens)
        app.router.add_get(f"{prefix}/responses/{one}", get_response)
        app.router.add_delete(f"{prefix}/responses/{one}", delete_response)
        app.router.add_post(f"{prefix}/responses/{one}/cancel", cancel_response)
        app.router.add_get(f"{prefix}/responses/{one}/input_items", list_input_items)
