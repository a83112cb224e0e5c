"""POST /v1/chat/completions (and the bare alias): one handler, streamed or not."""

from __future__ import annotations

import logging

from aiohttp import web
from mlx_responses.http_facade.chat.from_proto import chat_id, completion_json
from mlx_responses.http_facade.chat.stream import ChatFrames, ChoiceChunker
from mlx_responses.http_facade.chat.to_proto import ChatRequest, chat_from_json
from mlx_responses.http_facade.kit.errors import FALLBACK, OpenAIError
from mlx_responses.http_facade.kit.relay import ChoiceStreams, choice_params, create_all
from mlx_responses.http_facade.kit.requests import read_json, routed
from mlx_responses.http_facade.kit.sse import write_stream

from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)


async def create_chat_completion(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions: a chat turn with `n` choices, streamed or whole."""
    chat = chat_from_json(await read_json(request))
    client = routed(request, chat.params)
    params = choice_params(chat.params, chat.n)
    if chat.params.stream:
        return await stream_chat(request, ChoiceStreams(client, params), chat)
    try:
        responses = await create_all(client, params)
    except OpenAIError as error:
        raise chat.media.rename(error, chat.params) from None
    return web.json_response(completion_json(responses, chat.logprobs))


def _opening(streams: ChoiceStreams) -> pb.Response:
    """The response snapshot of the first choice's opening batch (id, created_at, model)."""
    for event in streams.firsts[0]:
        if event.HasField("snapshot"):
            return event.snapshot.response
    raise OpenAIError(FALLBACK, "the core opened a stream without a response")


async def stream_chat(
    request: web.Request, streams: ChoiceStreams, chat: ChatRequest
) -> web.StreamResponse:
    """`chat.completion.chunk` frames, then usage (if asked) and `[DONE]`."""
    try:
        try:
            await streams.open()
        except OpenAIError as error:
            raise chat.media.rename(error, chat.params) from None
        opening = _opening(streams)
        chunkers = [
            ChoiceChunker(chat_id(opening.id), opening.created_at, opening.model, i, chat.logprobs)
            for i in range(chat.n)
        ]
        render = ChatFrames(chunkers, chat.include_usage)
        return await write_stream(request, streams.events(request), render)
    finally:
        streams.cancel()


def add_chat_routes(app: web.Application) -> None:
    """Mounts chat completions under /v1 and bare."""
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", create_chat_completion)
