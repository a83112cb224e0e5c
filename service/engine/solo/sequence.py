"""One sequence decoded alone, the way mlx-lm's `generate_step` does it.

With one sequence and nobody waiting, mlx-lm's BatchGenerator costs about 12% against
`stream_generate` (its batched KV cache, masks and per-step bookkeeping). A lone sequence runs
here instead: a plain KV cache per layer, and the forward pass of step n+1 queued
(`mx.async_eval`) before the host reads step n's token. When a second request arrives, the
solo scheduler (`solo/scheduler.py`) hands the sequence to the scheduler behind it
(`handover`): its cache as the prompt cache and the token not yet fed as the prompt, so
nothing is recomputed and the tokens are the ones the batch would have produced.

A batch that shrinks to one such sequence hands it back here (`resumed`: its cache extracted,
its pending token not yet fed). Only sequences without logits processors (grammar, penalties)
run here; with n-gram speculation a lone sequence drafts here too (`drafting.py`), with a draft
model it does not run here (`schedulers.py` decides); under `--kv-bits` the cache is
quantized (mlx-lm's QuantizedKVCache, as the batch's entries are), on either side of a handover.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.cache_bytes import cache_nbytes
from mlx_responses.service.engine.scheduler import Admission, Token, chunk_to, sampled

Sampler = Callable[[mx.array], mx.array]
LogitsProcessor = Callable[[mx.array, mx.array], mx.array]


def _token(y: mx.array) -> int:
    """The host's wait for a sampled token (shape `(1,)`)."""
    return int(y.item())  # type: ignore[arg-type]


@dataclass
class Handover:
    """What the scheduler behind needs to go on with a solo sequence (its `Admission`).

    `emitted` is the token sampled and not yet sent (None while prefilling): the solo scheduler
    sends it before admitting, and the scheduler behind feeds it (`prompt`) without sending it
    again.
    """

    prompt: list[int]
    cache: list[Any]
    all_tokens: list[int]
    max_tokens: int
    sampler: Sampler
    emitted: Token | None


class SoloSequence:
    """A single sequence's prefill and decode, one `step` at a time, on the MLX thread."""

    def __init__(
        self,
        model: Any,
        stream: Any,
        *,
        uid: int,
        prompt: list[int],
        cache: list[Any],
        cached: list[int],
        sampler: Sampler,
        max_tokens: int,
        stop_tokens: Collection[int],
        prefill_step_size: int,
        checkpoints: Sequence[int] = (),
        keeps_prompt: bool = False,
        logits_processors: Sequence[LogitsProcessor] = (),
    ) -> None:
        """`checkpoints`: token counts where a prefill chunk ends (`at_checkpoint` then), as
        it does before the prompt's last token; `keeps_prompt`: a copy of the cache is taken
        once the whole prompt is in (`prompt_in`); `logits_processors` (grammar, penalties) see
        every token so far and the logits, as in mlx-lm's `generate_step`."""
        self.model = model
        self.stream = stream
        self.uid = uid
        self.cache = cache
        self.sampler = sampler
        self.max_tokens = max_tokens
        self.stop_tokens = stop_tokens
        self.prefill_step_size = max(1, prefill_step_size)
        self.tokens = list(cached)  # every token in the cache, in order
        self._rest = list(prompt)  # prompt tokens not fed yet
        self._pending: tuple[mx.array, mx.array] | None = None  # sampled, not fed, not sent
        self.generated = 0
        self.checkpoints = tuple(checkpoints)
        self.logits_processors = list(logits_processors)
        # What the processors see: every token fed (the last ones lazy), as generate_step keeps.
        self._context: mx.array | None = None
        # The last step's chunk ended at a checkpoint, or at the prompt's last token (which
        # the next step feeds): where the worker may keep a copy of the cache.
        self.at_checkpoint = False
        self.keeps_prompt = keeps_prompt
        # The cache once the whole prompt was in, before its first token was fed (a copy), and
        # its tokens: left by the step that sent the first token, for the worker to keep.
        self.prompt_in: tuple[list[Any], list[int]] | None = None

    @classmethod
    def admitted(
        cls,
        admission: Admission,
        model: Any,
        stream: Any,
        *,
        new_cache: Callable[[], list[Any]],
        stop_tokens: Collection[int],
        prefill_step_size: int,
        keeps_prompt: bool = False,
        logits_processors: Sequence[LogitsProcessor] = (),
    ) -> SoloSequence:
        """The sequence of `admission`, from its cached prefix (else a new cache), with a
        checkpoint where each of its prompt's segments but the last ends."""
        ends = itertools.accumulate(len(part) for part in admission.segments[:-1])
        return cls(
            model,
            stream,
            uid=admission.uid,
            prompt=admission.prompt,
            cache=admission.cache if admission.cache is not None else new_cache(),
            cached=admission.cached,
            sampler=admission.sampler,
            max_tokens=admission.max_tokens,
            stop_tokens=stop_tokens,
            prefill_step_size=prefill_step_size,
            checkpoints=[len(admission.cached) + end for end in ends],
            keeps_prompt=keeps_prompt,
            logits_processors=logits_processors,
        )

    @classmethod
    def resumed(
        cls,
        model: Any,
        stream: Any,
        *,
        uid: int,
        cache: list[Any],
        tokens: list[int],
        pending: tuple[mx.array, mx.array],
        sampler: Sampler,
        max_tokens: int,
        stop_tokens: Collection[int],
        prefill_step_size: int,
    ) -> SoloSequence:
        """A sequence taken out of a batch: its cache, and its token sampled and not yet fed."""
        solo = cls(
            model,
            stream,
            uid=uid,
            prompt=[],
            cache=cache,
            cached=tokens,
            sampler=sampler,
            max_tokens=max_tokens,
            stop_tokens=stop_tokens,
            prefill_step_size=prefill_step_size,
        )
        solo._pending = pending
        return solo

    @property
    def decoding(self) -> bool:
        """Whether the prompt is in (steps send tokens from now on)."""
        return not self._rest

    @property
    def nbytes(self) -> int:
        """The caches' bytes (counted against the prompt cache's budget)."""
        return cache_nbytes(self.cache)

    def _forward(self, tokens: mx.array) -> tuple[mx.array, mx.array]:
        logits = self.model(tokens[None], cache=self.cache)[:, -1, :]
        if self.logits_processors:
            if self._context is None:
                self._context = mx.array(self.tokens, mx.uint32)
            self._context = mx.concatenate([self._context, tokens.astype(mx.uint32)])
            for processor in self.logits_processors:
                logits = processor(self._context, logits)
        y, logprobs = sampled(self.sampler, logits)  # greedy: logprobs left unevaluated
        return y, logprobs.squeeze(0)

    def step(self) -> Token | None:
        """Prefills one chunk (None), or sends one token while the next one is computed."""
        with mx.stream(self.stream):
            if len(self._rest) > 1:
                step = min(self.prefill_step_size, len(self._rest) - 1)
                n = chunk_to(self.checkpoints, len(self.tokens), step)
                chunk, self._rest = self._rest[:n], self._rest[n:]
                self.model(mx.array(chunk)[None], cache=self.cache)
                mx.eval([c.state for c in self.cache])
                mx.clear_cache()  # as generate_step does after each prefill chunk
                self.tokens += chunk
                self.at_checkpoint = len(self._rest) == 1 or len(self.tokens) in self.checkpoints
                return None
            self.at_checkpoint = False
            if self._rest:
                y, logprobs = self._forward(mx.array(self._rest))
                mx.async_eval(y)  # the log probabilities where read (`scheduler.sampled`)
                self.tokens += self._rest
                self._rest = []
                if self.keeps_prompt:
                    # A copy before the first token is fed (which updates the cache).
                    kept = copy.deepcopy(self.cache)
                    mx.async_eval([c.state for c in kept])
                    self.prompt_in = (kept, list(self.tokens))
            else:
                assert self._pending is not None
                y, logprobs = self._pending
            # The token is fed (and the next one queued) before the host waits for it: the
            # cache then holds every token sent, as the batch's does.
            following = self._forward(y)
            mx.async_eval(following[0])
            self._pending = following
            return self._sent(_token(y), logprobs, fed=True)

    @property
    def pending(self) -> tuple[mx.array, mx.array] | None:
        """The token sampled and not yet fed nor sent (`(1,)`), with its step's logprobs."""
        return self._pending

    @pending.setter
    def pending(self, value: tuple[mx.array, mx.array] | None) -> None:
        self._pending = value

    def sent(self, token: int, logprobs: mx.array) -> Token:
        """Sends `token`, already fed (a verify step's, `drafting.py`)."""
        return self._sent(token, logprobs, fed=True)

    def _sent(self, token: int, logprobs: mx.array, *, fed: bool) -> Token:
        self.generated += 1
        if self.generated % 256 == 0:
            mx.clear_cache()  # as generate_step does
        if fed:
            self.tokens.append(token)
        finish = None
        if self.generated >= self.max_tokens:
            finish = "length"
        if token in self.stop_tokens:
            finish = "stop"
        done = finish is not None
        return Token(
            self.uid,
            token,
            logprobs,
            finish,
            self.cache if done else None,
            self.tokens if done else None,
        )

    def handover(self) -> Handover:
        """Ends solo decoding: the sampled token is sent here, the batch continues from it."""
        emitted = None
        prompt = self._rest
        if self._pending is not None:
            y, logprobs = self._pending
            self._pending = None
            emitted = self._sent(_token(y), logprobs, fed=False)
            prompt = [emitted.token]
        return Handover(
            prompt,
            self.cache,
            self.tokens,
            self.max_tokens - self.generated,
            self.sampler,
            emitted,
        )
