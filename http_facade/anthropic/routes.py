"""POST /v1/messages and /v1/messages/count_tokens (and the bare aliases)."""

from __future__ import annotations

import logging

from aiohttp import web
from mlx_responses.http_facade.anthropic.from_proto import message_json
from mlx_responses.http_facade.anthropic.stream import MessageFrames
from mlx_responses.http_facade.anthropic.to_proto import anthropic_media, messages_from_json
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.kit.relay import ChoiceStreams
from mlx_responses.http_facade.kit.requests import read_json, routed
from mlx_responses.http_facade.kit.sse import write_stream

log = logging.getLogger(__name__)


async def create_message(request: web.Request) -> web.StreamResponse:
    """POST /v1/messages: an Anthropic Messages turn, streamed or whole."""
    media = anthropic_media()
    params = messages_from_json(await read_json(request), media=media)
    client = routed(request, params)
    if not params.stream:
        try:
            done = await client.create(params)
        except OpenAIError as error:
            raise media.rename(error, params) from None
        return web.json_response(message_json(done))
    streams = ChoiceStreams(client, [params])
    try:
        try:
            await streams.open()
        except OpenAIError as error:
            raise media.rename(error, params) from None
        return await write_stream(request, streams.events(request), MessageFrames())
    finally:
        streams.cancel()


async def count_tokens(request: web.Request) -> web.Response:
    """POST /v1/messages/count_tokens: the rendered prompt's tokens, tools included."""
    media = anthropic_media()
    params = messages_from_json(await read_json(request), count_only=True, media=media)
    try:
        count = await routed(request, params).count_input_tokens(params)
    except OpenAIError as error:
        raise media.rename(error, params) from None
    return web.json_response({"input_tokens": count})


def add_anthropic_routes(app: web.Application) -> None:
    """Mounts the Messages API under /v1 and bare."""
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/messages", create_message)
        app.router.add_post(f"{prefix}/messages/count_tokens", count_tokens)
