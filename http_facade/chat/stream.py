"""Renders one choice's core events as `chat.completion.chunk` objects (a pure state machine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlx_responses.http_facade.chat.from_proto import SYSTEM_FINGERPRINT, logprob_json, usage_json
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.kit.finish import finish_reason
from mlx_responses.http_facade.kit.sse import data_frame

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

TERMINAL = (
    ev.EVENT_TYPE_RESPONSE_COMPLETED,
    ev.EVENT_TYPE_RESPONSE_INCOMPLETE,
    ev.EVENT_TYPE_RESPONSE_FAILED,
)


@dataclass
class ChoiceChunker:
    """Turns the events of one core stream into the chunks of choice `index`."""

    completion_id: str
    created: int
    model: str
    index: int = 0
    logprobs: bool = False
    final: pb.Response | None = None
    _tool_index: dict[str, int] = field(default_factory=dict)
    _started: bool = False

    def chunk(self, delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """A chunk of this choice carrying `delta`."""
        choice: dict[str, Any] = {"index": self.index, "delta": delta, "finish_reason": None}
        if self.logprobs:
            choice["logprobs"] = None
        choice.update(extra)
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [choice],
        }

    def feed(self, event: ev.ResponseEvent) -> list[dict[str, Any]]:
        """The chunks `event` produces (most events produce none)."""
        kind = event.type
        out = []
        if not self._started:
            self._started = True
            out.append(self.chunk({"role": "assistant", "content": ""}))
        if kind == ev.EVENT_TYPE_OUTPUT_TEXT_DELTA and event.text_delta.delta:
            delta = event.text_delta
            extra = {}
            if self.logprobs:
                tokens = [logprob_json(lp) for lp in delta.logprobs]
                extra["logprobs"] = {"content": tokens, "refusal": None}
            out.append(self.chunk({"content": delta.delta}, **extra))
        elif kind == ev.EVENT_TYPE_REASONING_TEXT_DELTA and event.text_delta.delta:
            text = event.text_delta.delta
            out.append(self.chunk({"reasoning": text, "reasoning_content": text}))
        elif kind == ev.EVENT_TYPE_OUTPUT_ITEM_ADDED:
            item = event.output_item.item
            if item.WhichOneof("item") == "function_call":
                call = item.function_call
                index = self._tool_index.setdefault(call.id, len(self._tool_index))
                tool = {
                    "index": index,
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
                out.append(self.chunk({"tool_calls": [tool]}))
        elif kind == ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA:
            found = self._tool_index.get(event.text_delta.item_id)
            if found is not None and event.text_delta.delta:
                arguments = {"index": found, "function": {"arguments": event.text_delta.delta}}
                out.append(self.chunk({"tool_calls": [arguments]}))
        elif kind in TERMINAL:
            self.final = event.snapshot.response
            out.append(self.chunk({}, finish_reason=finish_reason(self.final)))
        return out


@dataclass
class ChatFrames:
    """A chat stream's frames (kit/sse.py writes them): each choice's chunks, then the usage
    chunk (when asked) and `[DONE]`; a broken stream ends with the error (the SDK raises on a
    `data` payload with a top-level `error`)."""

    chunkers: list[ChoiceChunker]
    include_usage: bool = False

    def head(self) -> bytes:
        return b""

    def frames(self, index: int, event: ev.ResponseEvent) -> bytes:
        return b"".join(data_frame(c) for c in self.chunkers[index].feed(event))

    def tail(self) -> bytes:
        finals = [c.final for c in self.chunkers if c.final is not None]
        out = b""
        if self.include_usage and finals:
            usage = self.chunkers[0].chunk({})
            usage.update(choices=[], usage=usage_json(finals))
            out = data_frame(usage)
        return out + data_frame("[DONE]")

    def broken(self, error: OpenAIError) -> bytes:
        return data_frame(error.body())
