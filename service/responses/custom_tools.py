"""Custom (freeform) tools: shown to the model as functions taking one string, `input`.

A custom tool becomes a function tool whose parameters are `{"input": string}`; its grammar
(if any) is checked here, at create, and enforced when a call is generated
(service/engine/tool_grammar.py). A call to it leaves as a `custom_tool_call` whose input is
the string the model wrote (service/events.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import llguidance
from mlx_responses.service.errors import invalid
from mlx_responses.service.responses.tool_policy import ResolvedTools
from mlx_responses.service.text.custom_input import INPUT

from mlx_responses.v1 import responses_pb2 as pb

SYNTAXES = ("lark", "regex")


def input_schema(tool: pb.CustomTool) -> dict[str, Any]:
    """The parameters the model sees: one string."""
    description = "The tool's input: plain text, not JSON"
    if tool.WhichOneof("format") == "grammar":
        description += f", following its {tool.grammar.syntax} grammar"
    return {
        "type": "object",
        "properties": {INPUT: {"type": "string", "description": description + "."}},
        "required": [INPUT],
        "additionalProperties": False,
    }


def check_grammar(tool: pb.CustomTool, param: str) -> None:
    """A 400 naming `<param>.format.definition` for a grammar llguidance refuses."""
    if tool.WhichOneof("format") != "grammar":
        return
    grammar = tool.grammar
    if grammar.syntax not in SYNTAXES:
        raise invalid(
            f"Unsupported grammar syntax '{grammar.syntax}': expected lark or regex.",
            f"{param}.format.syntax",
            "invalid_value",
        )
    if grammar.syntax == "lark":
        text = llguidance.LLMatcher.grammar_from_lark(grammar.definition)
    else:
        text = llguidance.LLMatcher.grammar_from_regex(grammar.definition)
    error = llguidance.LLMatcher.validate_grammar(text)
    if error:
        detail = error.strip().splitlines()[0] if error.strip() else "invalid grammar"
        raise invalid(
            f"Invalid {grammar.syntax} grammar for custom tool '{tool.name}': {detail}",
            f"{param}.format.definition",
            "invalid_grammar",
        )


def lower(resolved: ResolvedTools) -> ResolvedTools:
    """The request with each custom tool as a function tool; `custom` names them."""
    params = resolved.params
    if not any(t.WhichOneof("tool") == "custom" for t in params.tools):
        if params.tool_choice.WhichOneof("choice") == "custom_name":
            raise invalid(
                f"tool_choice names the custom tool '{params.tool_choice.custom_name}', "
                "which is not in 'tools'.",
                "tool_choice",
            )
        return resolved
    lowered = pb.CreateResponseParams()
    lowered.CopyFrom(params)
    del lowered.tools[:]
    custom: dict[str, pb.CustomTool] = {}
    for i, tool in enumerate(params.tools):
        if tool.WhichOneof("tool") != "custom":
            lowered.tools.append(tool)
            continue
        spec = tool.custom
        if not spec.name:
            raise invalid("Custom tools need a 'name'.", f"tools[{i}].name")
        check_grammar(spec, f"tools[{i}]")
        custom[spec.name] = spec
        fn = pb.FunctionTool(name=spec.name, parameters_json=json.dumps(input_schema(spec)))
        if spec.HasField("description"):
            fn.description = spec.description
        lowered.tools.append(pb.Tool(function=fn))
    if lowered.tool_choice.WhichOneof("choice") == "custom_name":
        lowered.tool_choice.function_name = lowered.tool_choice.custom_name
    return replace(resolved, params=lowered, custom=custom)


def custom_names(custom: Mapping[str, pb.CustomTool]) -> frozenset[str]:
    """The names the model calls custom tools by."""
    return frozenset(custom)
