"""How a finished core response ended, as Chat and Completions name it (`finish_reason`)."""

from __future__ import annotations

from mlx_responses.http_facade.kit.errors import FALLBACK, OpenAIError

from mlx_responses.v1 import responses_pb2 as pb


def finish_reason(response: pb.Response) -> str:
    """`tool_calls`, `length` or `stop`; a failed or cancelled turn raises."""
    if response.status == pb.RESPONSE_STATUS_FAILED:
        raise OpenAIError(FALLBACK, response.error.message or "generation failed")
    if response.status == pb.RESPONSE_STATUS_CANCELLED:
        raise OpenAIError(FALLBACK, "generation was cancelled")
    if any(item.WhichOneof("item") == "function_call" for item in response.output):
        return "tool_calls"
    if response.status == pb.RESPONSE_STATUS_INCOMPLETE:
        return "length"
    return "stop"
