"""Encodes a finished core response as an Anthropic `message` object."""

from __future__ import annotations

import json
from typing import Any

from mlx_responses.http_facade.kit.errors import FALLBACK, OpenAIError

from mlx_responses.v1 import responses_pb2 as pb


def message_id(response_id: str) -> str:
    """`msg_...`, derived from the core's response id."""
    return "msg_" + response_id.removeprefix("resp_")


def tool_input(arguments: str) -> Any:
    """A tool call's arguments as the `input` object (grammar-enforced JSON; text if not)."""
    try:
        value = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}


def stop_reason(response: pb.Response) -> str:
    """`tool_use`, `max_tokens`, `stop_sequence` or `end_turn`; a failed turn raises."""
    if response.status == pb.RESPONSE_STATUS_FAILED:
        raise OpenAIError(FALLBACK, response.error.message or "generation failed")
    if response.status == pb.RESPONSE_STATUS_CANCELLED:
        raise OpenAIError(FALLBACK, "generation was cancelled")
    if any(item.WhichOneof("item") == "function_call" for item in response.output):
        return "tool_use"
    if response.status == pb.RESPONSE_STATUS_INCOMPLETE:
        return "max_tokens"
    if response.HasField("stop_sequence"):
        return "stop_sequence"
    return "end_turn"


def usage_json(usage: pb.Usage) -> dict[str, Any]:
    """Anthropic counts the prompt tokens read from the cache and those written to it apart
    from `input_tokens` (the three add up to the prompt)."""
    return {
        "input_tokens": usage.input_tokens - usage.cached_tokens - usage.breakpoint_write_tokens,
        "cache_creation_input_tokens": usage.breakpoint_write_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "output_tokens": usage.output_tokens,
    }


def blocks_json(item: pb.Item) -> list[dict[str, Any]]:
    """The content blocks of one output item."""
    kind = item.WhichOneof("item")
    if kind == "reasoning":
        text = "".join(p.text for p in item.reasoning.content)
        return [{"type": "thinking", "thinking": text, "signature": ""}]
    if kind == "function_call":
        call = item.function_call
        return [
            {
                "type": "tool_use",
                "id": call.call_id,
                "name": call.name,
                "input": tool_input(call.arguments),
            }
        ]
    if kind == "message":
        text = "".join(
            p.output_text.text
            for p in item.message.content
            if p.WhichOneof("part") == "output_text"
        )
        return [{"type": "text", "text": text}] if text else []
    return []


def message_json(response: pb.Response) -> dict[str, Any]:
    """The whole `message` object."""
    reason = stop_reason(response)
    return {
        "id": message_id(response.id),
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": [block for item in response.output for block in blocks_json(item)],
        "stop_reason": reason,
        "stop_sequence": response.stop_sequence if reason == "stop_sequence" else None,
        "usage": usage_json(response.usage),
    }
