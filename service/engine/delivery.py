"""What the worker keeps of each request while it runs, and a token's log probabilities."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import mlx.core as mx
import numpy as np
from mlx_responses.service.engine.prompt_cache.expiry import Lifetimes
from mlx_responses.service.engine.requests import Chunk, TokenLogprob
from mlx_responses.service.engine.scheduler import Token

S = TypeVar("S")  # the request's stream


@dataclass
class Active(Generic[S]):
    """A request the worker holds: its stream, detokenizer and counts."""

    stream: S
    detokenizer: Any
    generated: int = 0
    cached_tokens: int = 0
    logprobs: int = -1
    submitted_at: float = 0.0
    last_token_at: float = 0.0
    scope: str = ""  # whose prompt-cache entries it may use and leaves (--isolate-keys)
    prompt_tokens: int = 0
    # The longest prefix of the prompt that this request's entries hold (checkpoints, or the
    # finished turn's): what it wrote to the prompt cache beyond `cached_tokens`.
    written_to: int = 0
    # An image prompt's prompt-cache key (vision/cache_key.py; None: its tokens are its key).
    key: list[int] | None = None
    # How long the entries it leaves are kept (service/text/retention.py); None: LRU only.
    retention: Lifetimes | None = None
    # Its shallowest checkpoint (its system turn's end, where it has one; 0: none).
    system_end: int = 0

    def within(self, tokens: list[int]) -> bool:
        """Whether a scheduler's entry of `tokens` where a prompt ended is one of this prompt's
        checkpoints (a sequence handed over mid-decode "ends" a prompt past it)."""
        return len(tokens) <= self.prompt_tokens

    def kind(self, tokens: int, written: int) -> str:
        """The kind of an entry of `tokens` holding `written` prompt tokens, as the prompt cache
        evicts them (`prompt_cache.KINDS`): a finished turn's, the system turn's, or another
        checkpoint's."""
        if tokens > self.prompt_tokens:
            return "assistant"
        return "system" if written == self.system_end else "user"

    def chunk(self, token: Token, text: str, logprobs: tuple[TokenLogprob, ...]) -> Chunk:
        """The chunk of its latest token (`generated` counts it): the first carries the prompt
        tokens the cache held, the last those it wrote, a verify's first its drafts."""
        finish = token.finish_reason
        return Chunk(
            text,
            1,
            finish,
            cached_tokens=self.cached_tokens if self.generated == 1 else 0,
            logprobs=logprobs,
            token_ids=(token.token,),
            cache_written=self.written_to - self.cached_tokens if finish else 0,
            draft_tokens=token.drafted,
            accepted_draft_tokens=token.accepted,
        )

    def keyed(self, tokens: list[int]) -> list[int]:
        """An entry's `tokens` as its prompt-cache key (an image prompt's images standing in
        it)."""
        if self.key is None:
            return tokens
        return self.key[: len(tokens)] + tokens[len(self.key) :]


def token_logprobs(
    decode: Callable[[list[int]], str], token: int, logprobs: mx.array, top: int
) -> tuple[TokenLogprob, ...]:
    """The sampled token's log probability and, with `top` > 0, the `top` most likely tokens
    at its position (`top` < 0: none asked)."""
    if top < 0:
        return ()
    alternatives: tuple[tuple[str, float], ...] = ()
    values = np.array(logprobs, dtype=np.float32)
    if top > 0:
        ids = np.argpartition(-values, top - 1)[:top]
        ranked = ids[np.argsort(-values[ids])]
        alternatives = tuple((decode([int(i)]), float(values[i])) for i in ranked)
    return (TokenLogprob(decode([token]), float(values[token]), alternatives),)
