"""Renders core events as Anthropic Messages SSE events (a pure state machine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlx_responses.http_facade.anthropic.from_proto import message_id, stop_reason, usage_json
from mlx_responses.http_facade.kit.errors import OpenAIError, anthropic_error_body
from mlx_responses.http_facade.kit.sse import frame

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

TERMINAL = (
    ev.EVENT_TYPE_RESPONSE_COMPLETED,
    ev.EVENT_TYPE_RESPONSE_INCOMPLETE,
    ev.EVENT_TYPE_RESPONSE_FAILED,
)
BLOCK_START = {
    "message": {"type": "text", "text": ""},
    "reasoning": {"type": "thinking", "thinking": "", "signature": ""},
}


@dataclass
class MessageEvents:
    """Turns the events of one core stream into `message_start` ... `message_stop`."""

    _blocks: dict[str, int] = field(default_factory=dict)  # item id -> content block index
    _started: bool = False
    final: pb.Response | None = None

    def _block(self, item_id: str) -> int | None:
        return self._blocks.get(item_id)

    def feed(self, event: ev.ResponseEvent) -> list[dict[str, Any]]:
        """The Anthropic events `event` produces, in order."""
        kind = event.type
        out: list[dict[str, Any]] = []
        if not self._started and event.HasField("snapshot"):
            self._started = True
            out += self._start(event.snapshot.response)
        if kind == ev.EVENT_TYPE_OUTPUT_ITEM_ADDED:
            out += self._block_start(event.output_item.item)
        elif kind in (ev.EVENT_TYPE_OUTPUT_TEXT_DELTA, ev.EVENT_TYPE_REASONING_TEXT_DELTA):
            index = self._block(event.text_delta.item_id)
            if index is not None and event.text_delta.delta:
                delta = (
                    {"type": "text_delta", "text": event.text_delta.delta}
                    if kind == ev.EVENT_TYPE_OUTPUT_TEXT_DELTA
                    else {"type": "thinking_delta", "thinking": event.text_delta.delta}
                )
                out.append({"type": "content_block_delta", "index": index, "delta": delta})
        elif kind == ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA:
            index = self._block(event.text_delta.item_id)
            if index is not None and event.text_delta.delta:
                delta = {"type": "input_json_delta", "partial_json": event.text_delta.delta}
                out.append({"type": "content_block_delta", "index": index, "delta": delta})
        elif kind == ev.EVENT_TYPE_OUTPUT_ITEM_DONE:
            out += self._block_stop(event.output_item.item)
        elif kind in TERMINAL:
            self.final = event.snapshot.response
            reason = stop_reason(self.final)
            sequence = self.final.stop_sequence if reason == "stop_sequence" else None
            out.append(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": sequence},
                    "usage": usage_json(self.final.usage),
                }
            )
            out.append({"type": "message_stop"})
        return out

    def _start(self, response: pb.Response) -> list[dict[str, Any]]:
        message: dict[str, Any] = {
            "id": message_id(response.id),
            "type": "message",
            "role": "assistant",
            "model": response.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # NOTE: the prompt's size arrives with message_delta (cumulative, as Anthropic's).
            "usage": usage_json(response.usage),
        }
        return [{"type": "message_start", "message": message}, {"type": "ping"}]

    def _block_start(self, item: pb.Item) -> list[dict[str, Any]]:
        kind = item.WhichOneof("item")
        if kind == "function_call":
            call = item.function_call
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": call.call_id,
                "name": call.name,
                "input": {},
            }
            item_id = call.id
        elif kind in BLOCK_START:
            block = dict(BLOCK_START[kind])
            item_id = getattr(item, kind).id
        else:
            return []
        index = self._blocks[item_id] = len(self._blocks)
        return [{"type": "content_block_start", "index": index, "content_block": block}]

    def _block_stop(self, item: pb.Item) -> list[dict[str, Any]]:
        kind = item.WhichOneof("item")
        if kind not in ("function_call", "message", "reasoning"):
            return []
        index = self._block(getattr(item, kind).id)
        if index is None:
            return []
        out: list[dict[str, Any]] = []
        if kind == "reasoning":
            delta = {"type": "signature_delta", "signature": ""}
            out.append({"type": "content_block_delta", "index": index, "delta": delta})
        out.append({"type": "content_block_stop", "index": index})
        return out


@dataclass
class MessageFrames:
    """A Messages stream's frames (kit/sse.py writes them); a broken stream ends with an
    Anthropic `error` event."""

    events: MessageEvents = field(default_factory=MessageEvents)

    def head(self) -> bytes:
        return b""

    def frames(self, index: int, event: ev.ResponseEvent) -> bytes:
        return b"".join(frame(p) for p in self.events.feed(event))

    def tail(self) -> bytes:
        return b""

    def broken(self, error: OpenAIError) -> bytes:
        return frame(anthropic_error_body(error))
