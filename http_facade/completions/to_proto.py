"""Decodes a legacy Completions body: one CreateResponseParams per prompt, raw text prompts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlx_responses.http_facade.kit.decode import expect, flag, integer
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.sampling import choices, include_usage, sampling

from mlx_responses.v1 import responses_pb2 as pb

LOGPROBS_INCLUDE = "message.output_text.logprobs"
DEFAULT_MAX_TOKENS = 16  # the legacy API's own default
MAX_LOGPROBS = 5
MAX_PROMPTS = 16


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
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.", None, "invalid_type")
    for name in ("model", "prompt"):
        if body.get(name) is None:
            raise invalid(
                f"Missing required parameter: '{name}'.", name, "missing_required_parameter"
            )
    if body.get("suffix") is not None:
        raise invalid("'suffix' (insertion) is not supported.", "suffix", "unsupported_value")
    n = choices(body)
    if body.get("best_of") is not None and integer(body["best_of"], "best_of") != n:
        raise invalid("'best_of' other than 'n' is not supported.", "best_of", "unsupported_value")
    echo = flag(body, "echo")
    logprobs = None
    if body.get("logprobs") is not None:
        logprobs = integer(body["logprobs"], "logprobs")
        if not 0 <= logprobs <= MAX_LOGPROBS:
            raise invalid(
                f"Invalid 'logprobs': {logprobs}; must be between 0 and {MAX_LOGPROBS}.",
                "logprobs",
                "invalid_value",
            )
        if echo:
            raise invalid(
                "'echo' with 'logprobs' is not supported (no prompt logprobs).",
                "echo",
                "unsupported_value",
            )
    base = pb.CreateResponseParams(
        model=expect(body["model"], str, "model", "a string"), store=False
    )
    base.max_output_tokens = DEFAULT_MAX_TOKENS
    if body.get("max_tokens") is not None:
        base.max_output_tokens = integer(body["max_tokens"], "max_tokens")
        if base.max_output_tokens < 1:
            raise invalid(
                "Invalid 'max_tokens': must be at least 1.", "max_tokens", "invalid_value"
            )
    sampling(body, base)
    if body.get("user") is not None:
        base.user = expect(body["user"], str, "user", "a string")
    if logprobs is not None:
        base.include.append(LOGPROBS_INCLUDE)
        base.top_logprobs = logprobs
    stream = flag(body, "stream")
    base.stream = stream
    prompts = []
    for text in _prompts(body["prompt"]):
        params = pb.CreateResponseParams()
        params.CopyFrom(base)
        params.prompt = text
        prompts.append(params)
    return CompletionRequest(prompts, n, echo, logprobs, include_usage(body), stream)
