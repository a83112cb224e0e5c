"""One small handler per endpoint; each translates JSON to a core RPC and back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiohttp import web
from mlx_responses.http_facade.beta_features import check_compaction_trigger
from mlx_responses.http_facade.body import read_body
from mlx_responses.http_facade.client import CoreClient, CoreEventStream
from mlx_responses.http_facade.core_pool import CorePool
from mlx_responses.http_facade.drain import SHUTDOWN_MESSAGE, STREAMS
from mlx_responses.http_facade.errors import (
    MODEL_NOT_FOUND,
    STREAM_BROKEN_CODE,
    OpenAIError,
    invalid,
)
from mlx_responses.http_facade.from_proto import item_to_json, response_to_json, usage_to_json
from mlx_responses.http_facade.hangups import decide, decides_on_hangup
from mlx_responses.http_facade.item_lists import page_query, page_to_json, query_int
from mlx_responses.http_facade.json_body import parse_body
from mlx_responses.http_facade.keep_alive import keep_alive_from
from mlx_responses.http_facade.sse import SSE_HEADERS, frame, frames
from mlx_responses.http_facade.to_proto import _integer, params_from_json
from mlx_responses.http_facade.websocket import responses_socket

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1.generation_service_pb2 import Model

log = logging.getLogger(__name__)

CORES = web.AppKey("core_pool", CorePool)
AFFINITY = web.RequestKey("affinity", str)  # the affinity key a request was routed by


def core(request: web.Request) -> CoreClient:
    """The core for a request that names no prompt (a SERVING one, round robin)."""
    return request.app[CORES].pick()


def routed(request: web.Request, params: pb.CreateResponseParams) -> CoreClient:
    """The core for a request with a prompt: the one most likely to hold its prefix in cache
    (--core-routing); a response it creates is remembered there for the turns chained on it."""
    client, key = request.app[CORES].route(params)
    request[AFFINITY] = key
    return client


def remember(request: web.Request, response_id: str) -> None:
    """Tells the pool which key made `response_id` (a routed request's)."""
    key = request.get(AFFINITY)
    if key is not None and response_id:
        request.app[CORES].created(key, response_id)


async def read_json(request: web.Request) -> Any:
    """The parsed body, or a 400 for malformed JSON."""
    return parse_body(await read_body(request))


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
        response = web.StreamResponse(headers=SSE_HEADERS)
        return await _write_stream(request, response, client, stream, first)
    finally:
        stream.cancel()


async def _write_stream(
    request: web.Request,
    response: web.StreamResponse,
    client: CoreClient,
    stream: CoreEventStream,
    first: list[ev.ResponseEvent],
) -> web.StreamResponse:
    """Writes the events of an accepted stream (its first batch read already)."""
    await response.prepare(request)
    await response.write(frames(first))
    last = first[-1] if first else None
    last_snapshot = _snapshot(first)
    # Tracked by its response id, so a shutdown can end it with a terminal event.
    tracking = (
        request.app[STREAMS].track(last_snapshot.id, client, stream)
        if last_snapshot is not None
        else contextlib.nullcontext(None)
    )
    with tracking as tracked:
        broke = None
        try:
            async for batch in stream.rest():
                await response.write(frames(batch))
                last = batch[-1]
                last_snapshot = _snapshot(batch) or last_snapshot
        except OpenAIError as error:
            log.error("stream broke: %s", error.message)
            broke = error.message
        except asyncio.CancelledError:
            # The shutdown drain cut the core call (this handler was not cancelled).
            if tracked is None or not tracked.aborted or _cancelling():
                raise
            broke = SHUTDOWN_MESSAGE
        if broke is not None:
            # The core broke mid-stream, or went unanswered at shutdown: end with a whole
            # response.failed frame.
            failed: dict[str, Any] = (
                response_to_json(last_snapshot) if last_snapshot is not None else {}
            )
            failed.update(status="failed", error={"code": STREAM_BROKEN_CODE, "message": broke})
            sequence = (last.sequence_number + 1) if last else 0
            await response.write(
                frame({"type": "response.failed", "sequence_number": sequence, "response": failed})
            )
        if tracked is not None:
            tracked.ended_cancelled = broke is not None or (
                last_snapshot is not None and last_snapshot.status == pb.RESPONSE_STATUS_CANCELLED
            )
    await response.write_eof()
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
        keep = _integer(keep, "keep_tokens")
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


def _model_json(m: Model) -> dict[str, Any]:
    # context_length (the config's max_position_embeddings) sizes keep_tokens and thresholds;
    # the rest says whether it is in memory, what its weights take and when it leaves.
    return {
        "id": m.id,
        "object": "model",
        "created": m.created,
        "owned_by": m.owned_by,
        "context_length": m.context_length,
        "loaded": m.loaded,
        "memory_bytes": m.memory_bytes,
        "expires_at": m.expires_at if m.HasField("expires_at") else None,
        "pinned": m.pinned,
        "failure": (
            {"message": m.failure.message, "reload_after": m.failure.reload_after}
            if m.HasField("failure")
            else None
        ),
    }


async def list_models(request: web.Request) -> web.Response:
    """GET /v1/models: every model the server serves, loaded or not."""
    models = await core(request).list_models()
    return web.json_response({"object": "list", "data": [_model_json(m) for m in models]})


async def get_model(request: web.Request) -> web.Response:
    """GET /v1/models/{model}: one served model."""
    name = request.match_info["model"]
    for m in await core(request).list_models():
        if m.id == name:
            return web.json_response(_model_json(m))
    raise OpenAIError(MODEL_NOT_FOUND, f"The model '{name}' does not exist.", param="model")


async def load_model(request: web.Request) -> web.Response:
    """POST /v1/models/{model}/load: loads the model now (on every serving core)."""
    body = await read_json(request) if request.can_read_body else {}
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.", None, "invalid_type")
    keep_alive = keep_alive_from(body)
    name = request.match_info["model"]
    cores = request.app[CORES].healthy()
    models = await asyncio.gather(*(c.client.load_model(name, keep_alive) for c in cores))
    return web.json_response(_model_json(models[0]))


async def unload_model(request: web.Request) -> web.Response:
    """POST /v1/models/{model}/unload: unloads the model now (on every serving core); 409
    model_busy while a request uses it."""
    name = request.match_info["model"]
    cores = request.app[CORES].healthy()
    models = await asyncio.gather(*(c.client.unload_model(name) for c in cores))
    return web.json_response(_model_json(models[0]))


async def health(request: web.Request) -> web.Response:
    """GET /health: 200 only while a core reports SERVING."""
    if await request.app[CORES].serving():
        return web.json_response({"status": "ok"})
    return web.json_response({"status": "unavailable"}, status=503)


def add_routes(app: web.Application) -> None:
    """Mounts every endpoint under /v1 and bare (seed aliases)."""
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
        app.router.add_get(f"{prefix}/models", list_models)
        # Repo ids (org/name) are model ids too: the id may hold a slash. A path ending in
        # /load or /unload is those POST routes' (GET there is a 405 that allows POST only).
        app.router.add_get(f"{prefix}/models/{{model:(?!.*/(?:load|unload)$).+}}", get_model)
        app.router.add_post(f"{prefix}/models/{{model:.+}}/load", load_model)
        app.router.add_post(f"{prefix}/models/{{model:.+}}/unload", unload_model)
    app.router.add_get("/health", health)
