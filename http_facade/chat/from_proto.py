"""Encodes finished core responses as a Chat Completions `chat.completion` object."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlx_responses.http_facade.kit.finish import finish_reason

from mlx_responses.v1 import responses_pb2 as pb

SYSTEM_FINGERPRINT = "mlx-responses"


def chat_id(response_id: str) -> str:
    """`chatcmpl-...`, derived from the core's response id (one id per request, not per choice)."""
    return "chatcmpl-" + response_id.removeprefix("resp_")


def top_logprob_json(top: pb.TopLogprob) -> dict[str, Any]:
    return {"token": top.token, "logprob": top.logprob, "bytes": list(top.token_bytes)}


def logprob_json(lp: pb.Logprob) -> dict[str, Any]:
    """One token of `logprobs.content`."""
    return {
        "token": lp.token,
        "logprob": lp.logprob,
        "bytes": list(lp.token_bytes),
        "top_logprobs": [top_logprob_json(t) for t in lp.top_logprobs],
    }


def tool_call_json(call: pb.FunctionCallItem) -> dict[str, Any]:
    return {
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def message_json(response: pb.Response, logprobs: bool) -> tuple[dict[str, Any], Any]:
    """The assistant message of one choice, and its `logprobs` (None unless asked)."""
    text, reasoning, refusal = [], [], []
    calls: list[dict[str, Any]] = []
    tokens: list[dict[str, Any]] = []
    for item in response.output:
        kind = item.WhichOneof("item")
        if kind == "message":
            for part in item.message.content:
                if part.WhichOneof("part") == "output_text":
                    text.append(part.output_text.text)
                    tokens += [logprob_json(lp) for lp in part.output_text.logprobs]
                elif part.WhichOneof("part") == "refusal":
                    refusal.append(part.refusal.refusal)
        elif kind == "reasoning":
            reasoning += [p.text for p in item.reasoning.content]
        elif kind == "function_call":
            calls.append(tool_call_json(item.function_call))
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(text) if text or not calls else None,
        "refusal": "".join(refusal) if refusal else None,
    }
    if reasoning:
        # `reasoning` as vLLM and openai/gpt-oss's clients read it; `reasoning_content` as
        # DeepSeek's and the older clients do.
        message["reasoning"] = message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message, ({"content": tokens, "refusal": None} if logprobs else None)


def usage_json(responses: Sequence[pb.Response]) -> dict[str, Any]:
    """Usage over every choice: the prompt counted once, completions summed."""
    prompt = responses[0].usage.input_tokens
    completion = sum(r.usage.output_tokens for r in responses)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {
            "cached_tokens": responses[0].usage.cached_tokens,
            "cache_write_tokens": responses[0].usage.cache_write_tokens,
        },
        "completion_tokens_details": {
            "reasoning_tokens": sum(r.usage.reasoning_tokens for r in responses),
            # Speculative decoding's drafts kept and refused (OpenAI's Predicted Outputs names).
            "accepted_prediction_tokens": sum(r.usage.accepted_draft_tokens for r in responses),
            "rejected_prediction_tokens": sum(
                r.usage.draft_tokens - r.usage.accepted_draft_tokens for r in responses
            ),
        },
    }


def completion_json(responses: Sequence[pb.Response], logprobs: bool) -> dict[str, Any]:
    """The `chat.completion` object of one request's choices (one response per choice)."""
    first = responses[0]
    choices = []
    for index, response in enumerate(responses):
        message, lps = message_json(response, logprobs)
        choices.append(
            {
                "index": index,
                "message": message,
                "logprobs": lps,
                "finish_reason": finish_reason(response),
            }
        )
    return {
        "id": chat_id(first.id),
        "object": "chat.completion",
        "created": first.created_at,
        "model": first.model,
        "choices": choices,
        "usage": usage_json(responses),
        "service_tier": first.service_tier or "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
