"""Request handling every dialect shares: the body as JSON, and the core that serves a request."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from mlx_responses.http_facade.kit.body import read_body
from mlx_responses.http_facade.kit.client import CoreClient
from mlx_responses.http_facade.kit.core_pool import CorePool
from mlx_responses.http_facade.kit.json_body import parse_body

from mlx_responses.v1 import responses_pb2 as pb

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
