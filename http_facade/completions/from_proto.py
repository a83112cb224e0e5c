"""Encodes core responses as legacy `text_completion` objects and stream chunks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlx_responses.http_facade.kit.finish import finish_reason

from mlx_responses.v1 import responses_pb2 as pb


def completion_id(response_id: str) -> str:
    return "cmpl-" + response_id.removeprefix("resp_")


def output_text(response: pb.Response) -> tuple[str, list[pb.Logprob]]:
    """The generated text (a raw prompt's output is one message) and its token logprobs."""
    text, logprobs = [], []
    for item in response.output:
        if item.WhichOneof("item") == "message":
            for part in item.message.content:
                if part.WhichOneof("part") == "output_text":
                    text.append(part.output_text.text)
                    logprobs += list(part.output_text.logprobs)
    return "".join(text), logprobs


def logprobs_json(logprobs: Sequence[pb.Logprob], offset: int) -> dict[str, Any]:
    """The legacy logprobs object: parallel arrays, text offsets from `offset`."""
    offsets = []
    for lp in logprobs:
        offsets.append(offset)
        offset += len(lp.token)
    return {
        "tokens": [lp.token for lp in logprobs],
        "token_logprobs": [lp.logprob for lp in logprobs],
        "top_logprobs": [{t.token: t.logprob for t in lp.top_logprobs} for lp in logprobs],
        "text_offset": offsets,
    }


def usage_json(responses: Sequence[pb.Response], n: int) -> dict[str, Any]:
    """Each prompt counted once (its first choice), completions summed."""
    prompt = sum(r.usage.input_tokens for r in responses[::n])
    completion = sum(r.usage.output_tokens for r in responses)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion_json(
    responses: Sequence[pb.Response],
    prompts: Sequence[str],
    n: int,
    *,
    echo: bool,
    logprobs: bool,
) -> dict[str, Any]:
    """The whole `text_completion` object: choice i answers prompt i // n."""
    first = responses[0]
    out = []
    for index, response in enumerate(responses):
        text, lps = output_text(response)
        prefix = prompts[index // n] if echo else ""
        out.append(
            {
                "index": index,
                "text": prefix + text,
                "logprobs": logprobs_json(lps, len(prefix)) if logprobs else None,
                "finish_reason": finish_reason(response),
            }
        )
    return {
        "id": completion_id(first.id),
        "object": "text_completion",
        "created": first.created_at,
        "model": first.model,
        "choices": out,
        "usage": usage_json(responses, n),
    }
