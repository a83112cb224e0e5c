"""POST /v1/completions (and the bare alias): legacy text completions, streamed or whole."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from aiohttp import web
from mlx_responses.http_facade.completions.from_proto import (
    completion_id,
    completion_json,
    logprobs_json,
    usage_json,
)
from mlx_responses.http_facade.completions.to_proto import CompletionRequest, completion_from_json
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.kit.finish import finish_reason
from mlx_responses.http_facade.kit.relay import ChoiceStreams, choice_params, create_all
from mlx_responses.http_facade.kit.requests import read_json, routed
from mlx_responses.http_facade.kit.sse import SSE_HEADERS, data_frame

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)
TERMINAL = (
    ev.EVENT_TYPE_RESPONSE_COMPLETED,
    ev.EVENT_TYPE_RESPONSE_INCOMPLETE,
    ev.EVENT_TYPE_RESPONSE_FAILED,
)


async def create_completion(request: web.Request) -> web.StreamResponse:
    """POST /v1/completions: each prompt continued as raw text, `n` times."""
    req = completion_from_json(await read_json(request))
    params = [c for p in req.prompts for c in choice_params(p, req.n)]
    client = routed(request, params[0])
    texts = [p.prompt for p in req.prompts]
    if req.stream:
        return await _stream(request, ChoiceStreams(client, params), req, texts)
    responses = await create_all(client, params)
    body = completion_json(
        responses, texts, req.n, echo=req.echo, logprobs=req.logprobs is not None
    )
    return web.json_response(body)


def _chunk(opening: pb.Response, index: int, text: str, **extra: Any) -> dict[str, Any]:
    choice = {"index": index, "text": text, "logprobs": None, "finish_reason": None, **extra}
    return {
        "id": completion_id(opening.id),
        "object": "text_completion",
        "created": opening.created_at,
        "model": opening.model,
        "choices": [choice],
    }


async def _stream(
    request: web.Request, streams: ChoiceStreams, req: CompletionRequest, texts: list[str]
) -> web.StreamResponse:
    try:
        await streams.open()
        opening = next(e.snapshot.response for e in streams.firsts[0] if e.HasField("snapshot"))
        finals: dict[int, pb.Response] = {}
        offsets = dict.fromkeys(range(len(streams.streams)), 0)
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        if req.echo:
            for index in offsets:
                await response.write(data_frame(_chunk(opening, index, texts[index // req.n])))
        try:
            async with contextlib.aclosing(streams.events(request)) as events:
                async for index, batch in events:
                    out = b""
                    for event in batch:
                        if event.type == ev.EVENT_TYPE_OUTPUT_TEXT_DELTA and event.text_delta.delta:
                            delta = event.text_delta
                            extra = {}
                            if req.logprobs is not None:
                                extra["logprobs"] = logprobs_json(delta.logprobs, offsets[index])
                            offsets[index] += len(delta.delta)
                            out += data_frame(_chunk(opening, index, delta.delta, **extra))
                        elif event.type in TERMINAL:
                            finals[index] = event.snapshot.response
                            reason = finish_reason(finals[index])
                            out += data_frame(_chunk(opening, index, "", finish_reason=reason))
                    await response.write(out)
        except OpenAIError as error:
            log.error("completions stream broke: %s", error.message)
            await response.write(data_frame(error.body()))
            await response.write_eof()
            return response
        if req.include_usage and finals:
            usage = _chunk(opening, 0, "")
            ordered = [finals[i] for i in sorted(finals)]
            usage.update(choices=[], usage=usage_json(ordered, req.n))
            await response.write(data_frame(usage))
        await response.write(data_frame("[DONE]"))
        await response.write_eof()
        return response
    finally:
        streams.cancel()


def add_completions_routes(app: web.Application) -> None:
    """Mounts legacy completions under /v1 and bare."""
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/completions", create_completion)
