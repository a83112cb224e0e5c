"""Enforces `tool_choice` with a grammar: required, a named function, allowed_tools and auto.

Under `auto` the answer is free, but a call, once opened, names a declared function and its
arguments validate against that function's `parameters`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mlx_responses.service.errors import invalid
from mlx_responses.service.text.grammars import Grammar, GrammarFactory, SchemaError
from mlx_responses.service.text.json_bounds import JsonBounds
from mlx_responses.service.text.prompt import RenderedPrompt
from mlx_responses.service.text.request_json import RequestJson
from mlx_responses.service.text.tool_formats import ToolFormat, template_text
from mlx_responses.service.text.tool_grammar import (
    CustomFormat,
    Function,
    Reasoning,
    UnsupportedFormatError,
    tool_grammar,
)

from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)


def allowed_functions(params: pb.CreateResponseParams) -> tuple[list[str], bool] | None:
    """The functions a choice limits calls to and whether a call is required.

    None: nothing to enforce (`none`, or no function tools).
    """
    choice = params.tool_choice
    kind = choice.WhichOneof("choice")
    names = [t.function.name for t in params.tools]
    if kind == "function_name":
        return [choice.function_name], True
    if kind == "allowed_tools":
        allowed = set(choice.allowed_tools.names)
        subset = [n for n in names if n in allowed]
        return subset, choice.allowed_tools.mode == pb.TOOL_CHOICE_MODE_REQUIRED
    if kind == "mode" and choice.mode == pb.TOOL_CHOICE_MODE_REQUIRED:
        return names, True
    if kind is None or choice.mode in (pb.TOOL_CHOICE_MODE_AUTO, pb.TOOL_CHOICE_MODE_UNSPECIFIED):
        # `auto` still holds any call the model opens to a declared function and its schema.
        functions = [t.function.name for t in params.tools if t.WhichOneof("tool") == "function"]
        return (functions, False) if functions else None
    return None


@dataclass
class ToolConstraints:
    """Builds the per-request grammar processor of a constrained tool choice."""

    format: ToolFormat
    grammars: GrammarFactory
    tokenizer: Any
    _warned: bool = False
    _think_markers: tuple[str, str] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        # A vocabulary with think tokens is not enough: a template that never renders them
        # (a thinking model's weights behind a foreign template) gets no thought, which keeps
        # the model from a block it was never shown how to close in that format.
        start, end = self.tokenizer.think_start, self.tokenizer.think_end
        thinks = start and end and start in template_text(self.tokenizer._tokenizer)
        self._think_markers = (start, end) if thinks else None

    def _reasoning(self, prompt: RenderedPrompt) -> Reasoning | None:
        """The thought the grammar lets come before the answer, if this model thinks."""
        if self._think_markers is None:
            return None
        return Reasoning(*self._think_markers, prompt.opens_reasoning)

    def grammar(
        self,
        params: pb.CreateResponseParams,
        prompt: RenderedPrompt,
        parsed: RequestJson,
        max_tokens: int,
        custom: Mapping[str, pb.CustomTool] | None = None,
    ) -> Grammar | None:
        """The grammar of this request's choice (None when nothing is enforced).

        A custom tool's input follows its own grammar (`custom`: the lowered custom tools).
        """
        allowed = allowed_functions(params)
        if allowed is None:
            return None
        names, required = allowed
        custom = custom or {}
        functions = [
            Function(n, parsed.tool_parameters.get(n, {}), _format(custom.get(n))) for n in names
        ]
        reasoning = self._reasoning(prompt)
        subgrammars: dict[str, str] = {}
        try:
            grammar = tool_grammar(
                self.format,
                functions,
                required=required,
                parallel=params.parallel_tool_calls
                if params.HasField("parallel_tool_calls")
                else True,
                literal=self.grammars.literal,
                bounds=JsonBounds.for_budget(max_tokens),
                reasoning=reasoning,
                answer_schema=None if required else parsed.answer_schema,
                subgrammars=subgrammars,
            )
        except UnsupportedFormatError as exc:
            if not self._warned:
                log.warning("tool_choice is not enforced: %s", exc)
                self._warned = True
            return None
        try:
            return self.grammars.lark(grammar, subgrammars)
        except SchemaError as exc:
            raise invalid(
                f"The function parameters cannot be enforced: {exc}",
                "tools",
                "invalid_function_parameters",
            ) from exc


def _format(tool: pb.CustomTool | None) -> CustomFormat | None:
    """A custom tool's input format for the grammar builder; None for a function."""
    if tool is None:
        return None
    if tool.WhichOneof("format") == "grammar":
        return CustomFormat(tool.grammar.syntax, tool.grammar.definition)
    return CustomFormat("text")
