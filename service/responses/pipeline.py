"""The response pipeline: one per core, every create request of every model through it.

validation -> history -> prompt (the model's runtime renders it) -> automatic compaction ->
generation (the runtime's engine) -> events -> persistence. Per-core state lives here (the
stores, the history resolver, the reasoning echo, the hosted-tool policy, the in-flight turns);
what a loaded model can do is its ModelRuntime (service/models/runtime.py), which a request holds
through a lease for as long as it runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace

from mlx_responses.service.compaction.compactor import (
    CompactionResult,
    Compactor,
    compaction_due,
    validate_compact_request,
)
from mlx_responses.service.engine.requests import SamplingParams, TokenLogprob
from mlx_responses.service.engine.worker import GenerationStream
from mlx_responses.service.errors import SERVER_ERROR, ServiceError
from mlx_responses.service.ids import IdFactory, new_id
from mlx_responses.service.models.runtime import ModelRuntime
from mlx_responses.service.responses import builtin_tools
from mlx_responses.service.responses.custom_tools import lower
from mlx_responses.service.responses.events import EventAssembler
from mlx_responses.service.responses.history import HistoryResolver
from mlx_responses.service.responses.in_flight import InFlight, InFlightTurns
from mlx_responses.service.responses.item_ids import assign_ids, scoped_ids
from mlx_responses.service.responses.item_refs import resolve_references
from mlx_responses.service.responses.media_policy import MediaPolicy
from mlx_responses.service.responses.prompt_bounds import check_prompt_bound, no_room_for_output
from mlx_responses.service.responses.reasoning_echo import ReasoningEcho
from mlx_responses.service.responses.remote_media import RemoteMedia
from mlx_responses.service.responses.tool_outputs import check_outputs_answer_calls
from mlx_responses.service.responses.tool_policy import HostedToolPolicy, ResolvedTools
from mlx_responses.service.responses.tool_stream import ToolCallStreamer
from mlx_responses.service.responses.validation import check_client_template, validate_params
from mlx_responses.service.stores.base import ConversationStore, ResponseStore, StoredResponse
from mlx_responses.service.text.grammars import Grammar
from mlx_responses.service.text.media import RemoteBytes, fetched_media, has_media, naming_part
from mlx_responses.service.text.output_parser import Channel, Markers, OutputParser, Segment
from mlx_responses.service.text.prompt import RenderedPrompt
from mlx_responses.service.text.request_json import RequestJson
from mlx_responses.service.text.stop_sequences import StopScanner

from mlx_responses.v1 import compaction_service_pb2 as cp
from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)

LOGPROBS_INCLUDE = "message.output_text.logprobs"

FINISH_STATUS = {
    "stop": pb.RESPONSE_STATUS_COMPLETED,
    "length": pb.RESPONSE_STATUS_INCOMPLETE,
    "cancelled": pb.RESPONSE_STATUS_CANCELLED,
    "error": pb.RESPONSE_STATUS_FAILED,
}


def logprob_to_pb(lp: TokenLogprob) -> pb.Logprob:
    """An engine token logprob as the contract's Logprob."""
    return pb.Logprob(
        token=lp.token,
        logprob=lp.logprob,
        token_bytes=lp.token.encode(),
        top_logprobs=[pb.TopLogprob(token=t, logprob=v, token_bytes=t.encode()) for t, v in lp.top],
    )


@dataclass
class Turn:
    """A validated, rendered request, ready to generate on its model."""

    runtime: ModelRuntime
    params: pb.CreateResponseParams
    parsed: RequestJson
    response: pb.Response
    context: list[pb.Item]
    prompt: RenderedPrompt
    sampling: SamplingParams
    markers: Markers
    grammar: Grammar | None = None
    tool_streamer: ToolCallStreamer | None = None
    # Automatic compaction: due but deferred (a background job runs it), or done.
    compaction_pending: bool = False
    compaction: CompactionResult | None = None
    # Media not decoded yet: a background job decodes it in its queued phase.
    media_pending: bool = False
    # flattened namespace tool name -> (namespace, name): calls leave under their own names
    namespaced: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # custom tools by the name the model calls them: their calls leave as custom_tool_call
    custom: Mapping[str, pb.CustomTool] = field(default_factory=dict)
    # built-in client tools by the name the model calls them: their calls leave typed
    builtin: Mapping[str, str] = field(default_factory=dict)


def _requested(params: pb.CreateResponseParams, default: int) -> int:
    return params.max_output_tokens if params.HasField("max_output_tokens") else default


@dataclass
class ResponsePipeline:
    """The /v1/responses path of one core, shared by foreground, streamed and background turns."""

    responses: ResponseStore
    conversations: ConversationStore
    history: HistoryResolver
    default_max_output_tokens: int = 4096
    reasoning_echo: ReasoningEcho = field(default_factory=lambda: ReasoningEcho(0))
    tool_policy: HostedToolPolicy = field(default_factory=HostedToolPolicy)
    media_policy: MediaPolicy = field(default_factory=MediaPolicy)
    clock: Callable[[], float] = time.time
    ids: IdFactory = new_id
    in_flight: InFlightTurns = field(default_factory=InFlightTurns)
    allow_client_chat_template: bool = False  # --allow-client-chat-template
    remote_media: RemoteMedia | None = None  # --allow-remote-media
    max_prompt_tokens: int = 0  # --max-prompt-tokens (0: the context window only)

    # --- preparation -----------------------------------------------------------------------
    def initial_response(
        self, runtime: ModelRuntime, params: pb.CreateResponseParams, response_id: str
    ) -> pb.Response:
        """The response object as it stands before generation, echoing the request."""
        loaded = runtime.loaded
        r = pb.Response(
            id=response_id,
            created_at=int(self.clock()),
            status=pb.RESPONSE_STATUS_IN_PROGRESS,
            model=loaded.alias,
            temperature=params.temperature
            if params.HasField("temperature")
            else loaded.default_temperature,
            top_p=params.top_p if params.HasField("top_p") else loaded.default_top_p,
            top_logprobs=params.top_logprobs,
            presence_penalty=params.presence_penalty,
            frequency_penalty=params.frequency_penalty,
            parallel_tool_calls=params.parallel_tool_calls
            if params.HasField("parallel_tool_calls")
            else True,
            truncation="disabled",
            store=params.store if params.HasField("store") else True,
            background=params.background,
            service_tier=params.service_tier if params.HasField("service_tier") else "default",
            usage=pb.Usage(),
        )
        r.tools.extend(params.tools)
        r.tool_choice.CopyFrom(params.tool_choice)
        if r.tool_choice.WhichOneof("choice") is None:
            r.tool_choice.mode = pb.TOOL_CHOICE_MODE_AUTO
        r.text.CopyFrom(params.text)
        if r.text.WhichOneof("format") is None:
            r.text.text.SetInParent()
        r.reasoning.CopyFrom(params.reasoning)
        r.metadata.update(params.metadata)
        for name in (
            "instructions",
            "max_output_tokens",
            "previous_response_id",
            "conversation",
            "user",
            "safety_identifier",
            "prompt_cache_key",
        ):
            if params.HasField(name):
                setattr(r, name, getattr(params, name))
        return r

    def _resolve(
        self, runtime: ModelRuntime, params: pb.CreateResponseParams, log_id: str | None = None
    ) -> tuple[ResolvedTools, ResolvedTools]:
        """The request as the model takes it: media the model cannot read dropped or refused,
        hosted and namespace tools resolved, custom tools lowered to functions.

        Returns the tools as offered (what the response echoes) and as lowered.
        """
        media = self.media_policy.apply(params, log_id, reads_images=runtime.reads_media)
        offered = self.tool_policy.resolve(media)
        return offered, lower(builtin_tools.lower(offered))

    async def _render(
        self, runtime: ModelRuntime, params: pb.CreateResponseParams, *, decode_media: bool = True
    ) -> tuple[RequestJson, list[pb.Item], RenderedPrompt]:
        """Validates, resolves history and renders: the parsed JSON, the context, the prompt."""
        parsed = validate_params(params, runtime.loaded.accepts_name)
        check_client_template(parsed, self.allow_client_chat_template)
        history = await self.history.resolve(params)
        await resolve_references(params, history, self.responses, self.conversations)
        check_outputs_answer_calls(history, params.input)
        context = self.reasoning_echo.restore([*history, *params.input])
        fetched = await self._fetch_media(runtime, params) if decode_media else {}
        with fetched_media(fetched):
            # Off the event loop (the thread sees the fetched media: a copied context): a
            # template renders for up to its time limit.
            prompt = await asyncio.to_thread(
                runtime.render_request, params, parsed, context, decode_media=decode_media
            )
        return parsed, context, prompt

    async def _fetch_media(
        self, runtime: ModelRuntime, params: pb.CreateResponseParams
    ) -> Mapping[str, RemoteBytes]:
        """The request's remote images, fetched (`--allow-remote-media`; else none)."""
        if self.remote_media is None or not runtime.reads_media:
            return {}
        return await self.remote_media.fetch(params.input)

    async def decode_media(self, turn: Turn) -> None:
        """A background job's queued phase: decodes the images its admission left undecoded.

        A refused image fails the job (`invalid_prompt`), as the seed says of a media read.
        """
        if not turn.media_pending:
            return
        runtime = turn.runtime
        try:
            fetched = await self._fetch_media(runtime, turn.params)
            with fetched_media(fetched):
                turn.prompt = await asyncio.to_thread(
                    runtime.render_request, turn.params, turn.parsed, turn.context
                )
        except ServiceError as error:
            raise naming_part(error) from error
        turn.media_pending = False
        check_prompt_bound(len(turn.prompt.tokens), self.max_prompt_tokens)
        window = runtime.loaded.context_length
        if window - len(turn.prompt.tokens) < 1:
            raise no_room_for_output(len(turn.prompt.tokens), window)
        self._fit_output(turn)

    async def count_input_tokens(
        self, runtime: ModelRuntime, params: pb.CreateResponseParams
    ) -> int:
        """Rendered input tokens, history included, exactly as generation renders them."""
        _, resolved = self._resolve(runtime, params)
        _, _, prompt = await self._render(runtime, resolved.params)
        return len(prompt.tokens)

    # --- compaction ------------------------------------------------------------------------
    def _compactor(self, runtime: ModelRuntime) -> Compactor:
        return Compactor(runtime, self.ids, self.clock)

    async def compact(
        self, runtime: ModelRuntime, params: pb.CreateResponseParams, keep_tokens: int | None
    ) -> cp.CompactResponseResponse:
        """`POST /v1/responses/compact`: the compacted history; nothing is stored."""
        validate_compact_request(params, keep_tokens)
        params = self._resolve(runtime, params)[1].params
        parsed, context, prompt = await self._render(runtime, params)
        check_prompt_bound(len(prompt.tokens), self.max_prompt_tokens)
        return await self._compactor(runtime).compact_request(
            params, parsed, context, prompt, keep_tokens
        )

    async def run_compaction(self, turn: Turn) -> None:
        """Runs a due automatic compaction (deferred to here inside a background job)."""
        if not turn.compaction_pending:
            return
        runtime = turn.runtime
        result = await self._compactor(runtime).compact_params(
            turn.params, turn.parsed, turn.context, turn.prompt, log_id=turn.response.id
        )
        # The compaction item itself becomes output[0], so a stored chain holds it once.
        turn.context = list(result.kept)
        turn.prompt = await asyncio.to_thread(
            runtime.render_request, turn.params, turn.parsed, result.context
        )
        turn.compaction = result
        turn.compaction_pending = False
        self._fit_output(turn)

    def _fit_output(self, turn: Turn) -> None:
        """The output budget again, for a prompt that changed (compacted, or media decoded)."""
        room = turn.runtime.loaded.context_length - len(turn.prompt.tokens)
        requested = _requested(turn.params, self.default_max_output_tokens)
        turn.sampling = replace(turn.sampling, max_tokens=min(requested, room))

    async def prepare(
        self,
        runtime: ModelRuntime,
        params: pb.CreateResponseParams,
        response_id: str | None = None,
        *,
        defer_compaction: bool = False,
    ) -> Turn:
        """Everything refused before generation is refused here.

        Automatic compaction runs here too, unless deferred to a background job.
        """
        response_id = response_id or self.ids("resp")
        offered, resolved = self._resolve(runtime, params, response_id)
        params = resolved.params
        # A background job decodes its media in the queued phase (decode_media).
        media_pending = defer_compaction and has_media(params.input)
        parsed, context, prompt = await self._render(
            runtime, params, decode_media=not media_pending
        )
        # Every item the response holds has an id (input ones too, as OpenAI assigns them).
        assign_ids(context, response_id)
        check_prompt_bound(len(prompt.tokens), self.max_prompt_tokens)
        await self._check_store(params)
        window = runtime.loaded.context_length
        due = compaction_due(params, len(prompt.tokens), window)
        room = window - len(prompt.tokens)
        if room < 1 and not due:
            raise no_room_for_output(len(prompt.tokens), window)
        response = self.initial_response(runtime, params, response_id)
        # The echo shows custom and built-in tools as offered, not as the model sees them.
        if resolved.custom or resolved.builtin:
            del response.tools[:]
            response.tools.extend(offered.params.tools)
            response.tool_choice.CopyFrom(offered.params.tool_choice)
            if response.tool_choice.WhichOneof("choice") is None:
                response.tool_choice.mode = pb.TOOL_CHOICE_MODE_AUTO
        wants_logprobs = LOGPROBS_INCLUDE in params.include or params.top_logprobs > 0
        sampling = SamplingParams(
            max_tokens=max(1, min(_requested(params, self.default_max_output_tokens), room)),
            temperature=response.temperature,
            top_p=response.top_p,
            logprobs=params.top_logprobs if wants_logprobs else -1,
            top_k=params.top_k,
            seed=params.seed if params.HasField("seed") else None,
        )
        if not due:  # a compaction due shrinks the prompt first
            runtime.check_memory(len(prompt.tokens), sampling.max_tokens)
        tokenizer = runtime.loaded.tokenizer
        use_tools = bool(params.tools) and params.tool_choice.mode != pb.TOOL_CHOICE_MODE_NONE
        fmt = runtime.tool_format
        # A raw (legacy completions) prompt continues text: its output is never split.
        raw = params.HasField("prompt")
        markers = Markers(
            think_start=None if raw else tokenizer.think_start,
            think_end=None if raw else tokenizer.think_end,
            tool_start=fmt.start if use_tools else None,
            tool_end=fmt.end if use_tools else None,
            tool_leading=fmt.leading if use_tools else None,
            tool_bare=fmt.bare if use_tools else None,
        )
        streamer = None
        grammar = None
        if use_tools:
            streamer = ToolCallStreamer(fmt, parsed.tool_parameters, frozenset(resolved.custom))
            # A forced call's grammar already carries a text.format answer where one is allowed.
            grammar = runtime.tool_constraints.grammar(
                params, prompt, parsed, sampling.max_tokens, resolved.custom
            )
        if grammar is None:
            grammar = runtime.answer_grammar(parsed.answer_schema, sampling.max_tokens)
        turn = Turn(
            runtime, params, parsed, response, context, prompt, sampling, markers, grammar, streamer
        )
        turn.namespaced = resolved.namespaced
        turn.custom = resolved.custom
        turn.builtin = resolved.builtin
        turn.compaction_pending = due
        turn.media_pending = media_pending
        if due and not defer_compaction:
            await self._compact_in_flight(turn)
        return turn

    async def _check_store(self, params: pb.CreateResponseParams) -> None:
        """A turn that will be stored fails fast (503) while the store is unreachable.

        Otherwise it would generate first and fail at the final write. Reading history already
        reached the store (the same client), so only a turn without history pings it.
        """
        store = params.store if params.HasField("store") else True
        read_history = params.HasField("previous_response_id") or params.HasField("conversation")
        if store and self.responses.enabled and not read_history:
            await self.responses.check()

    async def _compact_in_flight(self, turn: Turn) -> None:
        """Runs a due compaction inline, registered as in flight so a cancel can stop it.

        A cancelled compaction leaves the turn to end `cancelled` in stream(), unsubmitted.
        """
        loop = asyncio.get_running_loop()
        task = loop.create_task(self.run_compaction(turn))
        running = InFlight(task.cancel, loop.create_future())
        self.in_flight[turn.response.id] = running
        log.info(
            "response %s: compacting %d input tokens", turn.response.id, len(turn.prompt.tokens)
        )
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if running.cancel_requested and not (current is not None and current.cancelling()):
                return
            self._abandon(turn.response.id)
            raise
        except BaseException:
            self._abandon(turn.response.id)
            raise

    def _abandon(self, response_id: str) -> None:
        """Forgets a turn that ends before it generates; a waiting cancel gets None."""
        running = self.in_flight.pop(response_id, None)
        if running is not None and not running.final.done():
            running.final.set_result(None)

    # --- generation ------------------------------------------------------------------------
    def _generate(self, turn: Turn) -> GenerationStream:
        """Queues the turn on its model's engine; a full queue is a 503 before anything streams."""
        params = turn.params
        checkpoints = turn.prompt.checkpoints
        if params.HasField("prompt_cache_key"):
            # Where this prompt parts from its key's previous one: a prefix the key's requests
            # share (service/text/key_prefixes.py).
            point = turn.runtime.key_checkpoint(params.prompt_cache_key, turn.prompt.tokens)
            checkpoints = tuple(sorted({*checkpoints, point} - {0}))
        try:
            stream = turn.runtime.submit(
                turn.prompt.tokens,
                turn.sampling,
                presence_penalty=params.presence_penalty,
                frequency_penalty=params.frequency_penalty,
                grammar=turn.grammar,
                reasoning_budget=params.reasoning_budget
                if params.HasField("reasoning_budget")
                else None,
                opens_reasoning=turn.prompt.opens_reasoning,
                vision=turn.prompt.vision,
                checkpoints=checkpoints,
                retention=turn.prompt.retention,
            )
        except BaseException:
            self._abandon(turn.response.id)
            raise
        running = self.in_flight.get(turn.response.id)
        if running is None:
            future = asyncio.get_running_loop().create_future()
            self.in_flight[turn.response.id] = InFlight(stream.cancel, future)
        else:
            running.stop = stream.cancel  # registered while it compacted
        return stream

    async def stream(self, turn: Turn) -> AsyncIterator[list[ev.ResponseEvent]]:
        """The events of one turn, in batches of those ready together."""
        running = self.in_flight.get(turn.response.id)
        # Cancelled while it compacted: it ends cancelled without reaching the engine.
        cancelled = running is not None and running.cancel_requested
        # `generate: false` (a WebSocket warm-up): the response ends at once, with no output.
        warm_up = turn.params.HasField("generate") and not turn.params.generate
        generation = None if cancelled or warm_up else self._generate(turn)
        assembler = EventAssembler(
            turn.response,
            scoped_ids(turn.response.id),
            turn.namespaced,
            frozenset(turn.custom),
            builtin=turn.builtin,
            summary=turn.params.reasoning.HasField("summary"),
        )
        try:
            opening = (
                assembler.start()
                if assembler.response.status != pb.RESPONSE_STATUS_QUEUED
                else assembler.in_progress()
            )
            if turn.compaction is not None:
                result = turn.compaction
                opening += assembler.compaction(
                    result.item, result.tokens_before, result.tokens_after
                )
            if generation is None:
                yield opening + await self._finish(
                    turn,
                    assembler,
                    "cancelled" if cancelled else "stop",
                    None,
                    output_tokens=0,
                    cached_tokens=0,
                    reasoning_tokens=0,
                )
                return
            yield opening
            parser = OutputParser(turn.markers, in_reasoning=turn.prompt.opens_reasoning)
            stops = StopScanner(turn.params.stop)
            output_tokens = 0
            cached_tokens = 0
            cache_written = 0
            reasoning_tokens = 0
            drafted = accepted = 0
            # Token logprobs wait here until the parser releases their text as answer text.
            pending: list[pb.Logprob] = []
            streamer = turn.tool_streamer
            async for chunks in generation.batches():
                events: list[ev.ResponseEvent] = []
                for chunk in chunks:
                    output_tokens += chunk.tokens
                    cached_tokens = max(cached_tokens, chunk.cached_tokens)
                    cache_written = max(cache_written, chunk.cache_written)
                    drafted += chunk.draft_tokens
                    accepted += chunk.accepted_draft_tokens
                    if parser.channel is Channel.REASONING:
                        reasoning_tokens += chunk.tokens
                    pending += [logprob_to_pb(lp) for lp in chunk.logprobs]
                    for segment in parser.feed(stops.feed(chunk.text)):
                        events += self._segment(assembler, segment, pending, streamer)
                    if streamer is not None and parser.channel is Channel.TOOL_CALL:
                        body = parser.partial_tool_body
                        events += streamer.update(assembler, body, bare=parser.bare_span)
                    if stops.matched is not None:
                        break
                last = chunks[-1]
                finish_reason = last.finish_reason
                if stops.matched is not None:
                    # A stop sequence ends the turn as an EOS would; the engine slot is freed.
                    generation.cancel()
                    assembler.response.stop_sequence = stops.matched
                    finish_reason, last = "stop", replace(last, error=None)
                elif finish_reason is not None:
                    for segment in parser.feed(stops.flush()):
                        events += self._segment(assembler, segment, pending, streamer)
                if finish_reason is not None:
                    cut = finish_reason == "length"
                    for segment in parser.finish():
                        events += self._segment(assembler, segment, pending, streamer, cut=cut)
                    events += await self._finish(
                        turn,
                        assembler,
                        finish_reason,
                        last.error,
                        output_tokens=output_tokens,
                        cached_tokens=cached_tokens,
                        reasoning_tokens=reasoning_tokens,
                        cache_written=cache_written,
                        drafts=(drafted, accepted),
                    )
                if events:
                    yield events
                if finish_reason is not None:
                    return
        finally:
            # A consumer gone before the first chunk never reached batches()' own cleanup.
            if generation is not None:
                generation.cancel()
            running = self.in_flight.pop(turn.response.id, None)
            if running is not None and not running.final.done():
                running.final.set_result(assembler.response)

    def _segment(
        self,
        assembler: EventAssembler,
        segment: Segment,
        pending: list[pb.Logprob],
        streamer: ToolCallStreamer | None,
        *,
        cut: bool = False,
    ) -> list[ev.ResponseEvent]:
        """Events of one parsed segment; ``cut``: the output budget ended it."""
        logprobs = pending[:]
        pending.clear()
        if segment.channel is Channel.REASONING:
            return assembler.reasoning_delta(segment.text)
        if segment.channel is Channel.TEXT or streamer is None:
            return assembler.text_delta(segment.text, logprobs)
        # The end-of-span parse is authoritative over what streamed.
        events = streamer.finish(assembler, segment.text, cut=cut, bare=segment.bare)
        if events is None:
            # A malformed call stays visible as text, exactly as generated, rather than vanishing.
            return assembler.text_delta(f"{segment.opener}{segment.text}{segment.closer}")
        return events

    async def _finish(
        self,
        turn: Turn,
        assembler: EventAssembler,
        finish: str,
        error: str | None,
        *,
        output_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int,
        cache_written: int = 0,
        drafts: tuple[int, int] = (0, 0),
    ) -> list[ev.ResponseEvent]:
        status = FINISH_STATUS[finish]
        input_tokens = len(turn.prompt.tokens)
        # What the cache wrote of the prefix the client's breakpoints asked it to.
        marked = min(turn.prompt.marked_end, cached_tokens + cache_written)
        usage = pb.Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
            cached_tokens=cached_tokens,
            reasoning_tokens=reasoning_tokens,
            cache_write_tokens=cache_written,
            breakpoint_write_tokens=max(0, marked - cached_tokens),
            draft_tokens=drafts[0],
            accepted_draft_tokens=drafts[1],
        )
        failure = None
        if status == pb.RESPONSE_STATUS_FAILED:
            failure = pb.ResponseError(code=SERVER_ERROR, message=error or "generation failed")
            log.error("response %s failed: %s", turn.response.id, failure.message)
        events = assembler.finish(
            status,
            usage,
            int(self.clock()),
            incomplete_reason="max_output_tokens" if finish == "length" else None,
            error=failure,
        )
        # Persist the final snapshot before the client can see it, so a GET right after works.
        await self.persist(turn, events[-1].snapshot.response)
        log.info(
            "response %s %s: %d input, %d output tokens",
            turn.response.id,
            finish,
            input_tokens,
            output_tokens,
        )
        return events

    async def persist(self, turn: Turn, final: pb.Response) -> None:
        """Stores the finished response and appends the turn to its conversation."""
        # The reply answers the request's last input item (compaction may have folded it).
        self.reasoning_echo.remember(turn.params.input or turn.context, final.output)
        context = [*turn.context, *final.output]
        if final.store and self.responses.enabled:
            await self.responses.put(StoredResponse(response=final, context=context))
        if (
            turn.params.HasField("conversation")
            and final.output
            and final.status
            in (
                pb.RESPONSE_STATUS_COMPLETED,
                pb.RESPONSE_STATUS_INCOMPLETE,
            )
        ):
            await self.conversations.append(
                turn.params.conversation, [*turn.params.input, *final.output]
            )

    async def create(
        self,
        runtime: ModelRuntime,
        params: pb.CreateResponseParams,
        response_id: str | None = None,
    ) -> pb.Response:
        """Generates a whole response (`stream: false`)."""
        turn = await self.prepare(runtime, params, response_id)
        final = turn.response
        async for events in self.stream(turn):
            if events and events[-1].WhichOneof("payload") == "snapshot":
                final = events[-1].snapshot.response
        return final
