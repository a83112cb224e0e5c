"""The server's own routes: the models it serves (listed, loaded, unloaded) and its health."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from mlx_responses.http_facade.kit.errors import MODEL_NOT_FOUND, OpenAIError, invalid
from mlx_responses.http_facade.kit.keep_alive import keep_alive_from
from mlx_responses.http_facade.kit.requests import CORES, core, read_json

from mlx_responses.v1.generation_service_pb2 import Model


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


def add_model_routes(app: web.Application) -> None:
    """Mounts the model routes under /v1 and bare, and /health."""
    for prefix in ("/v1", ""):
        app.router.add_get(f"{prefix}/models", list_models)
        # Repo ids (org/name) are model ids too: the id may hold a slash. A path ending in
        # /load or /unload is those POST routes' (GET there is a 405 that allows POST only).
        app.router.add_get(f"{prefix}/models/{{model:(?!.*/(?:load|unload)$).+}}", get_model)
        app.router.add_post(f"{prefix}/models/{{model:.+}}/load", load_model)
        app.router.add_post(f"{prefix}/models/{{model:.+}}/unload", unload_model)
    app.router.add_get("/health", health)
