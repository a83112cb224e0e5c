"""Decodes a legacy Completions body (completions/protocol.py declares it): one
CreateResponseParams per prompt, raw text prompts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlx_responses.http_facade.completions.protocol import DEFAULT_MAX_TOKENS, FIELDS, MAX_PROMPTS
from mlx_responses.http_facade.kit.decode import expect
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.sampling import include_usage, stop_and_keep_alive

from mlx_responses.v1 import responses_pb2 as pb

LOGPROBS_INCLUDE = "message.output_text.logprobs"


@dataclass(frozen=True)
class CompletionRequest:
    """The core params of each prompt, and the options around them."""

    prompts: list[pb.CreateResponseParams]
    n: int = 1
    echo: bool = False
    logprobs: int | None = None
    include_usage: bool = False
    stream: bool = False


def _prompts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    expect(value, list, "prompt", "a string or an array of strings")
    if not value or not all(isinstance(p, str) for p in value):
        raise invalid(
            "Invalid 'prompt': expected a string or a non-empty array of strings (token-id "
            "prompts are not supported).",
            "prompt",
            "unsupported_value",
        )
    if len(value) > MAX_PROMPTS:
        raise invalid(f"At most {MAX_PROMPTS} prompts per request.", "prompt", "invalid_value")
    return list(value)


def completion_from_json(body: Any) -> CompletionRequest:
    """A legacy completions body; unknown fields are ignored."""
    base = pb.CreateResponseParams(store=False, max_output_tokens=DEFAULT_MAX_TOKENS)
    body, values = FIELDS.decode(body, base)
    n = values.get("n") or 1
    if values.get("best_of") is not None and values.get("best_of") != n:
        raise invalid("'best_of' other than 'n' is not supported.", "best_of", "unsupported_value")
    logprobs, echo = values.get("logprobs"), bool(values.get("echo"))
    if logprobs is not None and echo:
        raise invalid(
            "'echo' with 'logprobs' is not supported (no prompt logprobs).",
            "echo",
            "unsupported_value",
        )
    stop_and_keep_alive(body, base)
    if logprobs is not None:
        base.include.append(LOGPROBS_INCLUDE)
        base.top_logprobs = logprobs
    prompts = []
    for text in _prompts(body["prompt"]):
        params = pb.CreateResponseParams()
        params.CopyFrom(base)
        params.prompt = text
        prompts.append(params)
    return CompletionRequest(prompts, n, echo, logprobs, include_usage(body), base.stream)
