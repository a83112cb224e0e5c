"""Compaction: summarises the older turns of a history into one compaction item.

One implementation for `POST /v1/responses/compact` (CompactionService) and for automatic
compaction (`context_management`) in the generation path. The cut itself is pure
(service/compaction_split.py); this module drives the summary generation and the checks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mlx_responses.service.compaction.split import NothingToCompactError, split_history
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.errors import Reason, ServiceError, invalid
from mlx_responses.service.ids import IdFactory, new_id
from mlx_responses.service.models.runtime import ModelRuntime
from mlx_responses.service.text.compaction_items import effective_items, encode_compaction
from mlx_responses.service.text.harmony_reader import HarmonyReader
from mlx_responses.service.text.output_parser import Channel, Markers, OutputParser
from mlx_responses.service.text.prompt import RenderedPrompt, items_to_messages, render_prompt
from mlx_responses.service.text.request_json import RequestJson

from mlx_responses.v1 import compaction_service_pb2 as cp
from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)

DEFAULT_SUMMARY_TOKENS = 1024
MAX_SUMMARY_TOKENS = 16384
MAX_DEFAULT_KEEP_TOKENS = 8192
TRIM_ATTEMPTS = 4
SUMMARY_REQUEST = (
    "Summarize the conversation above so that it can continue from the summary alone: the "
    "user's goals, the facts and decisions so far, tool results and open questions. Reply "
    "with the summary only."
)

# Renders the request being compacted around a list of items (instructions, tools and
# template kwargs as the request gives them), exactly as /v1/responses renders it.
Render = Callable[[Sequence[pb.Item]], RenderedPrompt]


def default_keep_tokens(context_length: int) -> int:
    """1/16 of the context window, at most 8192 (seed)."""
    return max(1, min(context_length // 16, MAX_DEFAULT_KEEP_TOKENS))


def compaction_due(params: pb.CreateResponseParams, tokens: int, window: int) -> bool:
    """`context_management`: the count reaches a threshold or leaves no room for output."""
    thresholds = [entry.compact_threshold for entry in params.context_management]
    return bool(thresholds) and (tokens >= min(thresholds) or tokens >= window)


def context_exceeded(message: str) -> ServiceError:
    """The seed's refusal of a compaction that cannot work: 400 context_length_exceeded."""
    return ServiceError(Reason.CONTEXT_LENGTH_EXCEEDED, message, param="input")


def validate_compact_request(params: pb.CreateResponseParams, keep_tokens: int | None) -> None:
    """What `POST /v1/responses/compact` refuses beyond a create request's own checks."""
    if params.stream:
        raise invalid("'stream' is not supported by the compact endpoint.", "stream")
    if params.background:
        # NOTE: not in the seed; nothing is stored, so there is nothing to poll.
        raise invalid("'background' is not supported by the compact endpoint.", "background")
    if params.HasField("previous_response_id"):
        raise invalid(
            "'previous_response_id' is not supported by the compact endpoint: send the full "
            "history in 'input'.",
            "previous_response_id",
        )
    if params.HasField("conversation"):
        raise invalid(
            "'conversation' is not supported by the compact endpoint: send the full history "
            "in 'input'.",
            "conversation",
        )
    if keep_tokens is not None and keep_tokens <= 0:
        raise invalid(
            f"Invalid 'keep_tokens': {keep_tokens}; must be greater than 0.",
            "keep_tokens",
            "invalid_value",
        )
    if params.HasField("max_output_tokens") and not (
        1 <= params.max_output_tokens <= MAX_SUMMARY_TOKENS
    ):
        raise invalid(
            f"Invalid 'max_output_tokens': {params.max_output_tokens}; must be between 1 and "
            f"{MAX_SUMMARY_TOKENS}.",
            "max_output_tokens",
            "invalid_value",
        )


@dataclass(frozen=True)
class CompactionResult:
    """A compacted history and what it cost."""

    kept: list[pb.Item]  # system and developer messages, verbatim
    retained: list[pb.Item]  # the newest turns, verbatim
    item: pb.Item  # the compaction item (summary + retained items)
    usage: pb.Usage  # of the summary generation
    tokens_before: int
    tokens_after: int

    @property
    def context(self) -> list[pb.Item]:
        """What the history becomes: the kept messages and the compaction item."""
        return [*self.kept, self.item]

    @property
    def output(self) -> list[pb.Item]:
        """The compact endpoint's output: kept messages, retained items, compaction item."""
        return [*self.kept, *self.retained, self.item]


@dataclass
class Compactor:
    """Runs compactions of one model's requests (the compact endpoint and automatic ones)."""

    runtime: ModelRuntime
    ids: IdFactory = new_id
    clock: Callable[[], float] = time.time

    @property
    def loaded(self) -> LoadedModel:
        return self.runtime.loaded

    async def compact_request(
        self,
        params: pb.CreateResponseParams,
        parsed: RequestJson,
        context: list[pb.Item],
        prompt: RenderedPrompt,
        keep_tokens: int | None,
    ) -> cp.CompactResponseResponse:
        """The compact endpoint's answer for a validated, rendered request."""
        response_id = self.ids("cmp")
        result = await self.compact_params(
            params,
            parsed,
            context,
            prompt,
            keep_tokens=keep_tokens,
            summary_tokens=params.max_output_tokens
            if params.HasField("max_output_tokens")
            else DEFAULT_SUMMARY_TOKENS,
            log_id=response_id,
        )
        return cp.CompactResponseResponse(
            id=response_id,
            created_at=int(self.clock()),
            model=self.loaded.alias,
            output=result.output,
            usage=result.usage,
        )

    async def compact_params(
        self,
        params: pb.CreateResponseParams,
        parsed: RequestJson,
        context: list[pb.Item],
        prompt: RenderedPrompt,
        *,
        keep_tokens: int | None = None,
        summary_tokens: int = DEFAULT_SUMMARY_TOKENS,
        log_id: str = "",
    ) -> CompactionResult:
        """Compacts a request's context, sampling and rendering as the request asks.

        Automatic compaction keeps the default summary cap: max_output_tokens is the answer's.
        """
        return await self.compact(
            context,
            lambda items: self.runtime.render_request(params, parsed, items),
            keep_tokens=keep_tokens,
            max_output_tokens=summary_tokens,
            temperature=params.temperature
            if params.HasField("temperature")
            else self.loaded.default_temperature,
            top_p=params.top_p if params.HasField("top_p") else self.loaded.default_top_p,
            template_kwargs=parsed.template_kwargs,
            tokens_before=len(prompt.tokens),
            log_id=log_id,
        )

    def measure(self, items: Sequence[pb.Item]) -> int:
        """Tokens of items rendered alone through the chat template."""
        tokenizer = self.loaded.tokenizer
        try:
            messages = items_to_messages(None, items)
            return len(render_prompt(tokenizer, messages, None, {}, None).tokens)
        except ValueError:
            # A template that refuses a partial history: count the text itself.
            text = "\n".join(str(m.get("content", "")) for m in items_to_messages(None, items))
            return len(tokenizer.encode(text, add_special_tokens=False))

    def summary_prompt(
        self, items: Sequence[pb.Item], template_kwargs: dict[str, Any]
    ) -> RenderedPrompt:
        """The older turns followed by the request for a summary."""
        messages = items_to_messages(None, items)
        messages.append({"role": "user", "content": SUMMARY_REQUEST})
        tokenizer = self.loaded.tokenizer
        try:
            return render_prompt(tokenizer, messages, None, template_kwargs, tokenizer.think_start)
        except ValueError as exc:
            raise invalid(str(exc), "input", "invalid_prompt") from exc

    async def compact(
        self,
        items: Sequence[pb.Item],
        render: Render,
        *,
        keep_tokens: int | None = None,
        max_output_tokens: int = DEFAULT_SUMMARY_TOKENS,
        temperature: float = 0.0,
        top_p: float = 1.0,
        template_kwargs: dict[str, Any] | None = None,
        tokens_before: int | None = None,
        log_id: str = "",
    ) -> CompactionResult:
        """Summarises the older part of `items`; refuses (changing nothing) when it cannot."""
        window = self.loaded.context_length
        # Every render below runs in a worker thread: a template may take its time limit.
        if tokens_before is None:
            tokens_before = len((await asyncio.to_thread(render, items)).tokens)
        before = tokens_before
        if before > window:
            raise context_exceeded(
                f"The history is {before} tokens, longer than the model's {window}-token context "
                "window: it cannot be summarised in one generation."
            )
        keep = keep_tokens if keep_tokens is not None else default_keep_tokens(window)
        try:
            split = await asyncio.to_thread(
                split_history, effective_items(items), keep, self.measure
            )
        except NothingToCompactError as exc:
            raise context_exceeded(f"{exc} A summary would not shorten the context.") from exc
        # The compacted context with an empty summary bounds how long the summary may be.
        empty = pb.Item(
            compaction=pb.CompactionItem(encrypted_content=encode_compaction("", split.retained))
        )
        floor = len((await asyncio.to_thread(render, [*split.kept, empty])).tokens)
        prompt = await asyncio.to_thread(
            self.summary_prompt, [*split.kept, *split.older], template_kwargs or {}
        )
        prompt_room = window - len(prompt.tokens)
        fit_room = window - floor - 1
        if prompt_room < 1 or fit_room < 1:
            raise context_exceeded(
                "The summary does not fit: the turns to summarise and the retained turns leave "
                f"no room for it in the model's {window}-token context window."
            )
        shorten_room = before - floor - 1
        if shorten_room < 1:
            raise context_exceeded(
                f"A summary does not shorten the context: the history is {before} tokens and the "
                f"compacted form without any summary is already {floor}."
            )
        # NOTE: besides max_output_tokens, the summary is capped at what still fits and
        # still shortens the context, as generation is capped at the context left.
        budget = min(max_output_tokens, prompt_room, fit_room, shorten_room)
        summary, usage = await self._summarise(prompt, budget, temperature, top_p)
        item_id = self.ids("cmp")
        limit = min(window - 1, before - 1)
        for _ in range(TRIM_ATTEMPTS):
            item = pb.Item(
                compaction=pb.CompactionItem(
                    id=item_id, encrypted_content=encode_compaction(summary, split.retained)
                )
            )
            after = len((await asyncio.to_thread(render, [*split.kept, item])).tokens)
            if after <= limit:
                break
            # Re-tokenised text can be longer than the tokens generated (odd byte sequences):
            # cut the summary by the excess, as a length stop would have.
            summary = self._trim(summary, after - limit)
        if after >= window:
            raise context_exceeded(
                f"The summary does not fit: the compacted context is {after} tokens, leaving no "
                f"room for output in the model's {window}-token context window."
            )
        if after >= before:
            raise context_exceeded(
                f"The summary does not shorten the context ({before} tokens before, {after} after)."
            )
        log.info(
            "%s: compacted %d -> %d tokens (%d items summarised, %d retained, summary %d tokens)",
            log_id or "compaction",
            before,
            after,
            len(split.older),
            len(split.retained),
            usage.output_tokens,
        )
        return CompactionResult(split.kept, split.retained, item, usage, before, after)

    def _trim(self, text: str, excess: int) -> str:
        tokenizer = self.loaded.tokenizer
        tokens = tokenizer.encode(text, add_special_tokens=False)
        return str(tokenizer.decode(tokens[: max(0, len(tokens) - excess)]))

    async def _summarise(
        self, prompt: RenderedPrompt, max_tokens: int, temperature: float, top_p: float
    ) -> tuple[str, pb.Usage]:
        """One non-streaming generation; the answer text (reasoning dropped) is the summary."""
        sampling = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_p=top_p)
        stream = self.runtime.submit(prompt.tokens, sampling)
        tokenizer = self.loaded.tokenizer
        markers = Markers(tokenizer.think_start, tokenizer.think_end, None, None)
        parser = OutputParser(markers, in_reasoning=prompt.opens_reasoning)
        # A harmony model's summary is its final (or preamble) text, read by token.
        harmony = self.runtime.harmony
        reader = HarmonyReader(harmony.tokens, tokenizer, ()) if harmony is not None else None
        text: list[str] = []
        output_tokens = cached_tokens = reasoning_tokens = 0
        finish: str | None = None
        error: str | None = None
        async for chunks in stream.batches():
            for chunk in chunks:
                output_tokens += chunk.tokens
                cached_tokens = max(cached_tokens, chunk.cached_tokens)
                if reader is not None:
                    text += [
                        s.text for s in reader.feed(chunk.token_ids) if s.channel is Channel.TEXT
                    ]
                    reasoning_tokens = reader.reasoning_tokens
                else:
                    if parser.channel is Channel.REASONING:
                        reasoning_tokens += chunk.tokens
                    text += [s.text for s in parser.feed(chunk.text) if s.channel is Channel.TEXT]
                finish, error = chunk.finish_reason or finish, chunk.error or error
        ending = reader.finish() if reader is not None else parser.finish()
        text += [s.text for s in ending if s.channel is Channel.TEXT]
        if finish == "error":
            raise ServiceError(Reason.INTERNAL, f"The summary generation failed: {error}")
        if finish == "cancelled":
            raise ServiceError(Reason.NOT_READY, "The summary generation was stopped.")
        usage = pb.Usage(
            input_tokens=len(prompt.tokens),
            output_tokens=output_tokens,
            total_tokens=len(prompt.tokens) + output_tokens,
            cached_tokens=cached_tokens,
            reasoning_tokens=reasoning_tokens,
        )
        return "".join(text).strip(), usage
