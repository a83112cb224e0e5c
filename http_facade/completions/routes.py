"""POST /v1/completions (and the bare alias): legacy text completions, streamed or whole."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
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
from mlx_responses.http_facade.kit.sse import data_frame, write_stream

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


@dataclass
class CompletionFrames:
    """A legacy completions stream's frames (kit/sse.py writes them): the echoed prompts, each
    choice's text deltas and finish, then the usage chunk (when asked) and `[DONE]`."""

    opening: pb.Response
    req: CompletionRequest
    texts: list[str]
    choices: int
    finals: dict[int, pb.Response] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)

    def head(self) -> bytes:
        if not self.req.echo:
            return b""
        n = self.req.n
        return b"".join(
            data_frame(_chunk(self.opening, i, self.texts[i // n])) for i in range(self.choices)
        )

    def frames(self, index: int, event: ev.ResponseEvent) -> bytes:
        if event.type == ev.EVENT_TYPE_OUTPUT_TEXT_DELTA and event.text_delta.delta:
            delta = event.text_delta
            extra = {}
            offset = self.offsets.get(index, 0)
            if self.req.logprobs is not None:
                extra["logprobs"] = logprobs_json(delta.logprobs, offset)
            self.offsets[index] = offset + len(delta.delta)
            return data_frame(_chunk(self.opening, index, delta.delta, **extra))
        if event.type in TERMINAL:
            self.finals[index] = event.snapshot.response
            reason = finish_reason(self.finals[index])
            return data_frame(_chunk(self.opening, index, "", finish_reason=reason))
        return b""

    def tail(self) -> bytes:
        out = b""
        if self.req.include_usage and self.finals:
            usage = _chunk(self.opening, 0, "")
            ordered = [self.finals[i] for i in sorted(self.finals)]
            usage.update(choices=[], usage=usage_json(ordered, self.req.n))
            out = data_frame(usage)
        return out + data_frame("[DONE]")

    def broken(self, error: OpenAIError) -> bytes:
        return data_frame(error.body())


async def _stream(
    request: web.Request, streams: ChoiceStreams, req: CompletionRequest, texts: list[str]
) -> web.StreamResponse:
    try:
        await streams.open()
        opening = next(e.snapshot.response for e in streams.firsts[0] if e.HasField("snapshot"))
        render = CompletionFrames(opening, req, texts, len(streams.streams))
        return await write_stream(request, streams.events(request), render)
    finally:
        streams.cancel()


def add_completions_routes(app: web.Application) -> None:
    """Mounts legacy completions under /v1 and bare."""
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/completions", create_completion)
