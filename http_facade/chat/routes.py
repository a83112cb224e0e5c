"""POST /v1/chat/completions (and the bare alias): one handler, streamed or not."""

from __future__ import annotations

import contextlib
import logging

from aiohttp import web
from mlx_responses.http_facade.chat.from_proto import chat_id, completion_json, usage_json
from mlx_responses.http_facade.chat.stream import ChoiceChunker
from mlx_responses.http_facade.chat.to_proto import ChatRequest, chat_from_json
from mlx_responses.http_facade.kit.errors import FALLBACK, OpenAIError
from mlx_responses.http_facade.kit.relay import ChoiceStreams, choice_params, create_all
from mlx_responses.http_facade.kit.requests import read_json, routed
from mlx_responses.http_facade.kit.sse import SSE_HEADERS, data_frame

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
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        try:
            async with contextlib.aclosing(streams.events(request)) as events:
                async for index, batch in events:
                    chunks = [c for event in batch for c in chunkers[index].feed(event)]
                    await response.write(b"".join(data_frame(c) for c in chunks))
        except OpenAIError as error:
            # The SDK raises on a `data` payload with a top-level `error`.
            log.error("chat stream broke: %s", error.message)
            await response.write(data_frame(error.body()))
            await response.write_eof()
            return response
        finals = [c.final for c in chunkers if c.final is not None]
        if chat.include_usage and finals:
            usage = chunkers[0].chunk({})
            usage.update(choices=[], usage=usage_json(finals))
            await response.write(data_frame(usage))
        await response.write(data_frame("[DONE]"))
        await response.write_eof()
        return response
    finally:
        streams.cancel()


def add_chat_routes(app: web.Application) -> None:
    """Mounts chat completions under /v1 and bare."""
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", create_chat_completion)
