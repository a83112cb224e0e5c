"""POST /v1/embeddings (and the bare alias)."""

from __future__ import annotations

from aiohttp import web
from mlx_responses.http_facade.embeddings.from_proto import embeddings_json
from mlx_responses.http_facade.embeddings.to_proto import embeddings_from_json
from mlx_responses.http_facade.kit.requests import core, read_json


async def create_embeddings(request: web.Request) -> web.Response:
    """POST /v1/embeddings: one vector per input, as floats or base64."""
    req = embeddings_from_json(await read_json(request))
    reply = await core(request).embed(req.request)
    return web.json_response(embeddings_json(reply, req.encoding_format))


def add_embeddings_routes(app: web.Application) -> None:
    """Mounts embeddings under /v1 and bare."""
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/embeddings", create_embeddings)
