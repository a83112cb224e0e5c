"""GET /openapi.json: the façade's routes, built from its router and each dialect's schemas.

Paths and methods come from the aiohttp router (every mounted route is listed); each dialect
folder states its operations and schemas (`<dialect>/openapi.py`) and the app hands them in
(the kit imports no dialect); the server's own routes (models, health) and the error envelope
are stated here. A test validates real responses against this document, so the encoders and
the schema cannot drift.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any, Protocol

from aiohttp import web
from mlx_responses.http_facade.kit import errors, models
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.kit.openapi import (
    JSON,
    SSE,
    STRING,
    Operation,
    Schema,
    ref,
    sse_event,
    ts,
)

OPENAPI_VERSION = "3.1.0"


class ApiPart(Protocol):
    """A dialect's share of the document (its `openapi` module): its schemas and operations."""

    def schemas(self) -> dict[str, Schema]: ...

    def operations(self) -> dict[Callable[..., Any], Operation]: ...


# The headers of a WebSocket handshake (RFC 6455); without them the GET is a 405.
WEBSOCKET_HANDSHAKE: dict[str, Schema] = {
    "Upgrade": {"const": "websocket"},
    "Connection": {"const": "Upgrade"},
    "Sec-WebSocket-Version": {"const": "13"},
    "Sec-WebSocket-Key": {"type": "string", "pattern": "^[A-Za-z0-9+/]{21}[AQgw]==$"},
}


def _server_schemas() -> dict[str, Schema]:
    """The server's own routes (models, health) and the OpenAI error envelope."""
    error_types = sorted(
        {k.type for k in (*errors.REASON_TABLE.values(), *errors.GRPC_TABLE.values())}
        | {errors.FALLBACK.type, errors.INVALID_REQUEST.type}
    )
    return {
        # POST /v1/models/{model}/load: an empty body keeps the server's --keep-alive.
        "LoadModelRequest": ts("{keep_alive?: K}", K=KEEP_ALIVE_SCHEMA),
        "Model": ts(
            "{id: string, object: 'model', created: integer, owned_by: string,"
            " context_length?: integer, loaded?: boolean, memory_bytes?: integer,"
            " expires_at?: ?integer, pinned?: boolean,"
            " failure?: ?{message: string, reload_after: integer}}"
        ),
        "ModelList": ts("{object: 'list', data: $Model[]}"),
        "Health": ts("{status: 'ok' | 'unavailable'}"),
        "Error": ts(
            "{error: {message: string, type: T, param: string|null, code: string|null}}",
            T={"enum": error_types},
        ),
    }


def _operations(parts: Sequence[ApiPart]) -> dict[Callable[..., Any], Operation]:
    known: dict[Callable[..., Any], Operation] = {
        models.list_models: Operation(ok="ModelList"),
        models.get_model: Operation(ok="Model"),
        models.load_model: Operation("LoadModelRequest", "Model", body_required=False),
        models.unload_model: Operation(ok="Model", extra={"409": "Error"}),
        models.health: Operation(ok="Health", extra={"503": "Health"}),
    }
    for part in parts:
        known.update(part.operations())
    return known


def _content(name: str, media: str = JSON) -> dict[str, Any]:
    return {media: {"schema": ref(name)}}


def _operation(route: web.AbstractRoute, known: dict[Callable[..., Any], Operation]) -> Schema:
    handler = route.handler
    doc = inspect.getdoc(handler) or ""
    spec = known.get(handler, Operation())
    ok: Schema = {"description": "OK"}
    if spec.ok is not None:
        ok["content"] = _content(spec.ok)
        if spec.streams:
            ok["content"][SSE] = {"schema": sse_event(spec.stream_event, spec.stream_done)}
    canonical = route.resource.canonical if route.resource is not None else ""
    operation: Schema = {
        # Unique per path: the bare aliases share handlers with their /v1 routes.
        "operationId": re.sub(r"\W+", "_", f"{route.method.lower()}{canonical}").strip("_"),
        "summary": doc.splitlines()[0] if doc else handler.__name__,
        "responses": {
            "200": ok,
            **{s: {"description": s, "content": _content(n)} for s, n in spec.extra.items()},
            "default": {"description": "An error envelope", "content": _content(spec.error)},
        },
    }
    params = re.findall(r"{(\w+)}", canonical)
    if params:
        operation["parameters"] = [
            {"name": p, "in": "path", "required": True, "schema": STRING} for p in params
        ]
    if spec.upgrade:
        operation["parameters"] = [
            {"name": name, "in": "header", "required": True, "schema": schema}
            for name, schema in WEBSOCKET_HANDSHAKE.items()
        ]
        operation["responses"] = {
            "101": {"description": "Switching Protocols: the Responses WebSocket mode"},
            "default": operation["responses"]["default"],
        }
    if spec.request is not None:
        operation["requestBody"] = {
            "required": spec.body_required,
            "content": _content(spec.request),
        }
    return operation


def build_document(app: web.Application, parts: Sequence[ApiPart], version: str = "0") -> Schema:
    """The OpenAPI 3.1 document of every route mounted on `app`, its dialects' `parts` first."""
    known = _operations(parts)
    paths: dict[str, Schema] = {}
    for route in app.router.routes():
        if route.method in ("HEAD", "*") or route.resource is None:
            continue
        paths.setdefault(route.resource.canonical, {})[route.method.lower()] = _operation(
            route, known
        )
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "mlx-responses", "version": version},
        "paths": paths,
        "components": {
            "schemas": {
                **_server_schemas(),
                **{name: s for part in parts for name, s in part.schemas().items()},
            }
        },
    }


DOCUMENT = web.AppKey("openapi_document", dict)


def _version() -> str:
    try:
        return metadata.version("mlx-responses")
    except metadata.PackageNotFoundError:
        return "0"


async def openapi_json(request: web.Request) -> web.Response:
    """GET /openapi.json: the OpenAPI 3.1 document of this façade."""
    return web.json_response(request.app[DOCUMENT])


def install_openapi(app: web.Application, parts: Sequence[ApiPart]) -> None:
    """Adds GET /openapi.json; the document is built once the router is complete (startup)."""

    async def build(app: web.Application) -> None:
        app[DOCUMENT] = build_document(app, parts, _version())

    app.router.add_get("/openapi.json", openapi_json)
    app.on_startup.append(build)
