"""One loaded model and what it can do: render its prompts, compile its grammars, generate.

Per model, for as long as it is loaded: the weights and tokenizer (`loaded`), the engine thread
that owns them (`worker`), the tool-call format its chat template speaks and the grammars
compiled against its vocabulary. Nothing here knows a store or a response: the per-core
pipeline (service/responses/pipeline.py) holds a runtime for the length of a request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from mlx_responses.service.engine.memory.budget import MemoryLimitError
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.requests import (
    EngineStoppedError,
    LogitsProcessor,
    QueueFullError,
    SamplingParams,
)
from mlx_responses.service.engine.structured import GrammarProcessor
from mlx_responses.service.engine.worker import EngineWorker, GenerationStream
from mlx_responses.service.errors import Reason, ServiceError, invalid
from mlx_responses.service.ids import OWNER
from mlx_responses.service.models.processors import build_processors, request_specs
from mlx_responses.service.text.cache_breakpoints import (
    MAX_BREAKPOINTS,
    Mark,
    mark_positions,
    mark_retention,
    resolve_marks,
)
from mlx_responses.service.text.compaction_items import CompactionDecodeError
from mlx_responses.service.text.grammars import Grammar, GrammarFactory, SchemaError
from mlx_responses.service.text.json_bounds import JsonBounds
from mlx_responses.service.text.key_prefixes import KeyPrefixes
from mlx_responses.service.text.media import refuse_media
from mlx_responses.service.text.prompt import (
    RenderedPrompt,
    generation_start,
    items_to_messages,
    raw_prompt,
    render_prompt,
    system_turn_end,
    tools_to_template,
)
from mlx_responses.service.text.request_json import JsonObject, RequestJson
from mlx_responses.service.text.retention import UNBOUNDED, Retention
from mlx_responses.service.text.tool_choice import ToolConstraints
from mlx_responses.service.text.tool_formats import ToolFormat, detect_format

from mlx_responses.v1 import responses_pb2 as pb


def _queue_full() -> ServiceError:
    return ServiceError(Reason.QUEUE_FULL, "The generation queue is full; retry later.")


def _deepest(positions: Sequence[int | None]) -> int:
    """Where the deepest marked prefix found ends (0: none found)."""
    return max((p for p in positions if p is not None), default=0)


class ModelRuntime:
    """A loaded model's text protocol and engine, shared by every request to that model."""

    reads_media = False  # images and files: a VisionRuntime (service/models/vision_runtime.py)

    def __init__(self, loaded: LoadedModel, worker: EngineWorker) -> None:
        self.loaded = loaded
        self.worker = worker
        self.grammars = GrammarFactory(loaded.tokenizer._tokenizer, loaded.vocab_size)
        self.tool_format: ToolFormat = detect_format(loaded.tokenizer)
        self.tool_constraints = ToolConstraints(self.tool_format, self.grammars, loaded.tokenizer)
        self.key_prefixes = KeyPrefixes()

    # --- text ------------------------------------------------------------------------------
    def render(
        self,
        instructions: str | None,
        items: Sequence[pb.Item],
        tools: Sequence[pb.Tool],
        tool_parameters: Mapping[str, JsonObject],
        template_kwargs: Mapping[str, Any],
        *,
        marks: Sequence[Mark] = (),
        cache_ttl: float | None = None,
        memory_only: bool = False,
    ) -> RenderedPrompt:
        """The prompt of `items` through the model's chat template; a 400 if it refuses them.

        `marks`: the client's cache breakpoints (`resolve_marks`), found in the prompt's tokens
        for a model that takes checkpoints; with `cache_ttl` and `memory_only` (the request's
        own lifetime, and `in_memory` retention), how long the entries it writes are kept."""
        try:
            messages = items_to_messages(instructions, items)
        except CompactionDecodeError as exc:
            raise invalid(str(exc), "input", "invalid_compaction") from exc
        rendered_tools = tools_to_template(tools, tool_parameters) if tools else None
        tokenizer = self.loaded.tokenizer
        kwargs = dict(template_kwargs)
        try:
            prompt = render_prompt(
                tokenizer, messages, rendered_tools, kwargs, tokenizer.think_start
            )
        except ValueError as exc:
            raise invalid(str(exc), "input", "invalid_prompt") from exc
        if not self.worker.takes_checkpoints:
            # One entry holds every marked prefix (a trimmable cache replaces its prefixes).
            kept = mark_retention(
                marks, None, request_ttl=cache_ttl, memory_only=memory_only, merged=True
            )
            # Only the deepest prefix is looked for: its end is what the usage counts.
            deepest = sorted(marks, key=lambda mark: mark.depth, reverse=True)
            found: list[int | None] = []
            for mark in deepest:
                found = mark_positions(
                    tokenizer,
                    prompt.tokens,
                    [mark],
                    instructions=instructions,
                    items=items,
                    tools=tools,
                    tool_parameters=tool_parameters,
                    template_kwargs=kwargs,
                )
                if found[0] is not None:
                    break
            return replace(prompt, retention=kept, marked_end=_deepest(found))
        # The engine keeps an entry where the system turn ends (its caches cannot be cut back
        # to where a new conversation parts from an old one).
        end = system_turn_end(tokenizer, messages, rendered_tools, kwargs, prompt.tokens)
        # ... and where the client's breakpoints end (Anthropic cache_control and the like).
        positions = mark_positions(
            tokenizer,
            prompt.tokens,
            marks,
            instructions=instructions,
            items=items,
            tools=tools,
            tool_parameters=tool_parameters,
            template_kwargs=kwargs,
        )
        # ... and where the generation prompt begins (the next turn shares the prompt to there).
        start = generation_start(tokenizer, messages, rendered_tools, kwargs, prompt)
        inside = sorted({p for p in positions if p is not None and 0 < p < len(prompt.tokens)})
        kept = mark_retention(
            marks, positions, request_ttl=cache_ttl, memory_only=memory_only, merged=False
        )
        return replace(
            prompt,
            system_end=end,
            breakpoints=tuple(inside[-MAX_BREAKPOINTS:]),
            marked_end=_deepest(positions),
            generation_start=start,
            retention=kept,
        )

    def render_request(
        self,
        params: pb.CreateResponseParams,
        parsed: RequestJson,
        items: Sequence[pb.Item],
        *,
        decode_media: bool = True,
    ) -> RenderedPrompt:
        """A request's prompt around `items`: its instructions, tools and template kwargs.

        A text model refuses images and files in the request's input (the seed's 400).
        """
        refuse_media(params.input, "this text model")
        if params.HasField("prompt"):
            return raw_prompt(self.loaded.tokenizer, params.prompt)
        tools = params.tools if params.tool_choice.mode != pb.TOOL_CHOICE_MODE_NONE else []
        return self.render(
            params.instructions if params.HasField("instructions") else None,
            items,
            tools,
            parsed.tool_parameters,
            parsed.template_kwargs,
            marks=resolve_marks(params.cache_breakpoints, params.input, items),
            cache_ttl=params.prompt_cache_ttl_seconds
            if params.HasField("prompt_cache_ttl_seconds")
            else None,
            memory_only=params.prompt_cache_memory_only,
        )

    async def warm_up(self) -> float:
        """Pays the first request's one-time costs at load (service/engine/warm_up.py): renders
        a short conversation (the chat template compiles), compiles a tool grammar (the grammar
        tokenizer builds) and generates a few tokens, under that grammar and free, on the
        engine thread (the weights, loaded lazily, are read). Seconds it took; 0 where the
        template refuses the probe."""
        if self.worker.link is not None:  # a group's ranks run only what rank 0 sends them
            return 0.0
        started = time.perf_counter()
        try:
            prompt, grammar = await asyncio.to_thread(self._warm_up_prompt)
        except ServiceError:  # a template that wants other turns: the first request pays
            return 0.0
        constrained = [GrammarProcessor(grammar.matcher, grammar.vocab_size)] if grammar else []
        await self.worker.warm_up(prompt.tokens, constrained)
        await self.worker.warm_up(prompt.tokens)  # the unconstrained (solo) path
        return time.perf_counter() - started

    def _warm_up_prompt(self) -> tuple[RenderedPrompt, Grammar | None]:
        schema: JsonObject = {"type": "object", "properties": {"city": {"type": "string"}}}
        tool = pb.Tool(function=pb.FunctionTool(name="get_weather", description="The weather."))
        params = pb.CreateResponseParams(tools=[tool])
        parsed = RequestJson(tool_parameters={"get_weather": schema})
        # A short prompt (without the tool: its schema would add a prefill of no use).
        text = pb.ContentPart(input_text=pb.InputText(text="Hello."))
        items = [pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[text]))]
        prompt = self.render(None, items, [], {}, {})
        return prompt, self.tool_constraints.grammar(params, prompt, parsed, max_tokens=16)

    def key_checkpoint(self, key: str, tokens: Sequence[int]) -> int:
        """Where a prompt sent under `prompt_cache_key` `key` parts from the key's previous
        prompt, a checkpoint for a model that takes them (0: none; key_prefixes.py)."""
        if not key or not self.worker.takes_checkpoints:
            return 0
        return self.key_prefixes.part(OWNER.get() or "", key, tokens)

    def answer_grammar(self, schema: JsonObject | None, max_tokens: int) -> Grammar | None:
        """The grammar of a `text.format` schema, bounded so the answer fits `max_tokens`."""
        if schema is None:
            return None
        try:
            return self.grammars.json_schema(schema, JsonBounds.for_budget(max_tokens))
        except SchemaError as exc:
            raise invalid(
                f"Invalid JSON schema in 'text.format.schema': {exc}",
                "text.format.schema",
                "invalid_json_schema",
            ) from exc

    # --- generation ------------------------------------------------------------------------
    def check_room(self) -> None:
        """A 503 (QUEUE_FULL) now if a submit now would be refused for a full queue."""
        if not self.worker.has_room():
            self.worker.refused("queue_full")
            raise _queue_full()

    def check_memory(self, prompt_tokens: int, max_tokens: int) -> None:
        """A 400 (`memory_limit_exceeded`) now for a request that could never fit the memory
        budget (--memory-limit), before it is queued or streams."""
        try:
            self.worker.check_memory(prompt_tokens, max_tokens)
        except MemoryLimitError as exc:
            self.worker.refused("memory")
            raise invalid(str(exc), exc.param, "memory_limit_exceeded") from exc

    def submit(
        self,
        tokens: Sequence[int],
        sampling: SamplingParams,
        *,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        grammar: Grammar | None = None,
        reasoning_budget: int | None = None,
        opens_reasoning: bool = False,
        vision: object | None = None,
        checkpoints: Sequence[int] = (),
        retention: Retention = UNBOUNDED,
    ) -> GenerationStream:
        """Queues a generation; a full queue is a 503 (QUEUE_FULL) before anything runs, a
        request that can never fit the memory budget a 400 (`memory_limit_exceeded`).

        Penalties shift the logits first; a grammar's mask then has the last word. A reasoning
        budget applies only without a grammar (forcing think-end could contradict its mask).
        `vision` (a VLM's processed images) is never set for a text model. `checkpoints`: prompt
        positions worth a prompt-cache entry (the system turn's end, a client's breakpoints);
        `retention`: how long the entries it writes are kept (service/text/retention.py)."""
        specs = request_specs(
            self.loaded,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
            grammar=grammar,
            reasoning_budget=reasoning_budget,
            opens_reasoning=opens_reasoning,
        )
        processors = build_processors(specs, self.loaded, self.grammars, grammar)
        try:
            return self._enqueue(
                tokens, sampling, processors, vision, checkpoints=checkpoints, retention=retention
            )
        except MemoryLimitError as exc:
            self.worker.refused("memory")
            raise invalid(str(exc), exc.param, "memory_limit_exceeded") from exc
        except QueueFullError as exc:
            self.worker.refused("queue_full")
            raise _queue_full() from exc
        except EngineStoppedError as exc:
            raise ServiceError(Reason.NOT_READY, str(exc)) from exc

    def _enqueue(
        self,
        tokens: Sequence[int],
        sampling: SamplingParams,
        processors: list[LogitsProcessor],
        vision: object | None,
        *,
        checkpoints: Sequence[int],
        retention: Retention,
    ) -> GenerationStream:
        """Hands the generation to the engine (a VisionRuntime hands its images over too)."""
        return self.worker.submit(tokens, sampling, processors, checkpoints, retention=retention)
