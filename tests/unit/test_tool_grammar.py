"""The forced-call grammar of each format admits what the family's real template renders."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.text.grammars import GrammarFactory
from mlx_responses.service.text.json_bounds import JsonBounds
from mlx_responses.service.text.tool_formats import HermesFormat, format_for_template
from mlx_responses.service.text.tool_grammar import Function, Reasoning, tool_grammar
from transformers import AutoTokenizer

from tests.support.templates import CALLS, SCHEMAS, TEMPLATES, recorded_output

FAMILIES = ["qwen3_coder.jinja", "mistral_v0.3.jinja", "devstral_small_2.jinja", "llama3.2.jinja"]
REASONING = Reasoning("<think>", "</think>", opened=False)


@pytest.fixture(scope="module")
def factory() -> tuple[GrammarFactory, Any]:
    hf = AutoTokenizer.from_pretrained(BUNDLED_MODEL)
    return GrammarFactory(hf, len(hf)), hf


def _accepts(factory: tuple[GrammarFactory, Any], grammar: str, text: str) -> bool:
    grammars, hf = factory
    matcher = grammars.lark(grammar).matcher
    tokens = hf.encode(text, add_special_tokens=False)
    if matcher.validate_tokens(tokens) != len(tokens):
        return False
    matcher.consume_tokens(tokens)
    return bool(matcher.is_accepting())


def _grammar(
    factory: tuple[GrammarFactory, Any], template: str, names: list[str], **options: Any
) -> str:
    fmt = format_for_template((TEMPLATES / template).read_text())
    assert fmt is not None
    functions = [Function(n, SCHEMAS[n]) for n in names]
    settings: dict[str, Any] = {"required": True, "parallel": True, "reasoning": REASONING}
    settings.update(options)
    return tool_grammar(
        fmt, functions, literal=factory[0].literal, bounds=JsonBounds.for_budget(400), **settings
    )


@pytest.mark.parametrize("template", FAMILIES)
def test_grammar_admits_the_template_rendering(
    factory: tuple[GrammarFactory, Any], template: str
) -> None:
    calls = CALLS[:1]
    text = recorded_output(template, calls)
    assert _accepts(factory, _grammar(factory, template, ["get_weather", "get_time"]), text)
    assert not _accepts(factory, _grammar(factory, template, ["get_time"]), text)


@pytest.mark.parametrize(
    "template", ["qwen3_coder.jinja", "mistral_v0.3.jinja", "devstral_small_2.jinja"]
)
def test_parallel_calls_only_when_allowed(
    factory: tuple[GrammarFactory, Any], template: str
) -> None:
    text = recorded_output(template, CALLS)
    names = ["get_weather", "get_time"]
    assert _accepts(factory, _grammar(factory, template, names), text)
    assert not _accepts(factory, _grammar(factory, template, names, parallel=False), text)


def test_arguments_must_fit_the_parameters(factory: tuple[GrammarFactory, Any]) -> None:
    grammar = _grammar(factory, "llama3.2.jinja", ["get_weather"])
    assert _accepts(factory, grammar, '{"name": "get_weather", "parameters": {"city": "x"}}')
    assert not _accepts(factory, grammar, '{"name": "get_weather", "parameters": {"days": 2}}')
    assert not _accepts(factory, grammar, '{"name": "get_weather", "parameters": {"city": 5}}')


def test_auto_allows_an_answer_but_no_other_call(factory: tuple[GrammarFactory, Any]) -> None:
    hermes = HermesFormat()
    grammars, _ = factory
    grammar = tool_grammar(
        hermes,
        [Function("get_time", SCHEMAS["get_time"])],
        required=False,
        parallel=True,
        literal=grammars.literal,
        bounds=JsonBounds.for_budget(400),
    )
    assert _accepts(factory, grammar, "hello there")
    call = '<tool_call>\n{{"name": "{}", "arguments": {{"zone": "utc"}}}}\n</tool_call>'
    assert _accepts(factory, grammar, call.format("get_time"))
    assert not _accepts(factory, grammar, call.format("get_weather"))
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    json_answer = tool_grammar(
        hermes,
        [Function("get_time", SCHEMAS["get_time"])],
        required=False,
        parallel=True,
        literal=grammars.literal,
        bounds=JsonBounds.for_budget(400),
        answer_schema=schema,
    )
    assert _accepts(factory, json_answer, '{"a":1}')
    assert not _accepts(factory, json_answer, "hello there")


def test_a_thought_before_a_forced_call_closes_into_the_call(
    factory: tuple[GrammarFactory, Any],
) -> None:
    """The blank after a thought is bounded: a model denied its answer cannot pad forever."""
    grammar = _grammar(factory, "qwen3_coder.jinja", ["get_weather", "get_time"])
    call = recorded_output("qwen3_coder.jinja", CALLS[:1]).split("</think>")[1].lstrip()
    assert _accepts(factory, grammar, f"<think>\nThe user wants x.\n</think>\n\n{call}")
    assert not _accepts(factory, grammar, f"<think>\nx\n</think>{chr(10) * 12}{call}")


# pydantic writes `$defs` and `#/$defs/...` references for every enum and nested model (the
# OpenAI SDK's pydantic_function_tool, the Agents SDK's function tools); `#` is the root.
PAINT: dict[str, Any] = {
    "type": "object",
    "properties": {"color": {"$ref": "#/$defs/Color"}, "box": {"$ref": "#/$defs/Box"}},
    "required": ["color", "box"],
    "$defs": {
        "Color": {"enum": ["red", "blue"]},
        "Box": {
            "type": "object",
            "properties": {
                "w": {"type": "integer"},
                "inner": {"anyOf": [{"$ref": "#/$defs/Box"}, {"type": "null"}]},
            },
            "required": ["w"],
        },
    },
}
# The same definition name meaning something else in another tool.
MARK: dict[str, Any] = {
    "type": "object",
    "properties": {"color": {"$ref": "#/$defs/Color"}, "again": {"$ref": "#"}},
    "required": ["color"],
    "$defs": {"Color": {"enum": ["green"]}},
}


def _one_call(factory: tuple[GrammarFactory, Any], fmt: Any, functions: list[Function]) -> str:
    """A forced single call of one of `functions`, a thought allowed first."""
    return tool_grammar(
        fmt,
        functions,
        required=True,
        parallel=False,
        reasoning=REASONING,
        literal=factory[0].literal,
        bounds=JsonBounds.for_budget(400),
    )


@pytest.mark.parametrize("template", [*FAMILIES, "hermes"])
def test_references_in_parameters_resolve_inside_the_call(
    factory: tuple[GrammarFactory, Any], template: str
) -> None:
    if template == "hermes":
        fmt: Any = HermesFormat()

        def render(name: str, arguments: dict[str, Any]) -> str:
            call = json.dumps({"name": name, "arguments": arguments})
            return f"<tool_call>\n{call}\n</tool_call>"
    else:
        fmt = format_for_template((TEMPLATES / template).read_text())

        def render(name: str, arguments: dict[str, Any]) -> str:
            return recorded_output(template, [(name, arguments)])

    grammar = _one_call(factory, fmt, [Function("paint", PAINT), Function("mark", MARK)])
    box = {"w": 2, "inner": {"w": 1, "inner": None}}
    assert _accepts(factory, grammar, render("paint", {"color": "red", "box": box}))
    assert _accepts(
        factory, grammar, render("mark", {"color": "green", "again": {"color": "green"}})
    )
    assert not _accepts(factory, grammar, render("paint", {"color": "green", "box": box}))
    assert not _accepts(factory, grammar, render("mark", {"color": "red"}))


@pytest.mark.parametrize("template", FAMILIES)
def test_a_schema_with_its_own_id_keeps_its_references(
    factory: tuple[GrammarFactory, Any], template: str
) -> None:
    """Under an `$id`, `#` is that schema wherever it is nested: nothing to rewrite."""
    fmt = format_for_template((TEMPLATES / template).read_text())
    schema = {**PAINT, "$id": "https://example.com/paint.json"}
    grammar = _one_call(factory, fmt, [Function("paint", schema)])
    box = {"w": 2, "inner": None}
    assert _accepts(
        factory, grammar, recorded_output(template, [("paint", {"color": "red", "box": box})])
    )
    assert not _accepts(
        factory, grammar, recorded_output(template, [("paint", {"color": "pink", "box": box})])
    )
