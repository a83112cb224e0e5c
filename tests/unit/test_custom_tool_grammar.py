"""A custom tool's grammar holds for its input inside each family's tool-call format.

Codex's real apply_patch grammar (tests/fixtures) is the main case: a forced call admits
exactly the patches the grammar admits, written as the family's template writes them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.text.custom_input import input_of, partial_input
from mlx_responses.service.text.grammars import GrammarFactory
from mlx_responses.service.text.json_bounds import JsonBounds
from mlx_responses.service.text.json_quoted_grammar import (
    UnquotableGrammarError,
    escaped,
    quote_lark,
    regex_expression,
)
from mlx_responses.service.text.tool_formats import HermesFormat, format_for_template
from mlx_responses.service.text.tool_grammar import CustomFormat, Function, Reasoning, tool_grammar
from transformers import AutoTokenizer

from tests.support.templates import TEMPLATES, recorded_output

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "codex_0.169_apply_patch_tool.json"
APPLY_PATCH = json.loads(FIXTURE.read_text())["tool"]["format"]["definition"]
PATCHES = [
    "*** Begin Patch\n*** Add File: hello.txt\n+hi\n+second line\n*** End Patch\n",
    "*** Begin Patch\n*** Delete File: old.py\n*** End Patch",
    "*** Begin Patch\n*** Update File: src/app.py\n*** Move to: src/main.py\n"
    '@@ def f():\n-    return "x"\n'
    '+    return "y\\\\t"\t# tab\n*** End of File\n*** End Patch\n',
]
NOT_PATCHES = [
    "*** Begin Patch\n*** End Patch\n",  # no hunk
    "*** Begin Patch\n*** Add File: a\n+x\n",  # no end
    "*** Begin Patch\n*** Add File: a\nx\n*** End Patch\n",  # an added line without +
    '{"patch": "x"}',
]
THINK = Reasoning("<think>", "</think>", opened=False)
SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}


@pytest.fixture(scope="module")
def factory() -> tuple[GrammarFactory, Any]:
    hf = AutoTokenizer.from_pretrained(BUNDLED_MODEL)
    return GrammarFactory(hf, len(hf)), hf


def _accepts(
    factory: tuple[GrammarFactory, Any], lark: str, text: str, sub: dict[str, str] | None = None
) -> bool:
    grammars, hf = factory
    matcher = grammars.lark(lark, sub).matcher
    tokens = hf.encode(text, add_special_tokens=False)
    if matcher.validate_tokens(tokens) != len(tokens):
        return False
    matcher.consume_tokens(tokens)
    return bool(matcher.is_accepting())


@pytest.mark.parametrize("patch", PATCHES)
def test_quoted_grammar_admits_the_escaped_patch_only(
    factory: tuple[GrammarFactory, Any], patch: str
) -> None:
    quoted = quote_lark(APPLY_PATCH)
    assert _accepts(factory, APPLY_PATCH, patch)
    assert _accepts(factory, quoted, escaped(patch))
    assert not _accepts(factory, quoted, patch)  # raw newlines cannot sit in a JSON string


@pytest.mark.parametrize("text", NOT_PATCHES)
def test_quoted_grammar_refuses_what_the_grammar_refuses(
    factory: tuple[GrammarFactory, Any], text: str
) -> None:
    assert not _accepts(factory, APPLY_PATCH, text)
    assert not _accepts(factory, quote_lark(APPLY_PATCH), escaped(text))


@pytest.mark.parametrize(
    ("regex", "good", "bad"),
    [
        (r"[0-9]{3}-[a-z]+", "123-abc", "12-abc"),
        (r'say "(hi|yo)"\n?', 'say "yo"\n', "say yo"),
        (r"(?s:.*)end", 'a\n"b\\\tend', "a\nb"),
        (r"[^x]+", '\n\t"\\', "x"),
        (r"\w+\s\d", "ab\t4", "ab4"),
        (r"a{2,}b{1,3}", "aaabb", "abbbb"),
    ],
)
def test_regex_atoms_are_escaped(
    factory: tuple[GrammarFactory, Any], regex: str, good: str, bad: str
) -> None:
    expression = regex_expression(regex)
    assert re.fullmatch(regex, good) and not re.fullmatch(regex, bad)
    assert _accepts(factory, f"start: {expression}", escaped(good))
    assert not _accepts(factory, f"start: {expression}", escaped(bad))


@pytest.mark.parametrize(
    "grammar",
    [
        'start: "a" @other',
        "start: /(?i)abc/",
        'start: "a"\n%ignore " "',
        "start: /(?=a)a/",
        'start: <|python_tag|> "x"',
    ],
)
def test_features_it_cannot_carry_are_refused(grammar: str) -> None:
    with pytest.raises(UnquotableGrammarError):
        quote_lark(grammar)


def _call_grammar(
    factory: tuple[GrammarFactory, Any], fmt: Any, fn: Function, **options: Any
) -> tuple[str, dict[str, str]]:
    sub: dict[str, str] = {}
    settings: dict[str, Any] = {"required": True, "parallel": False}
    settings.update(options)
    grammar = tool_grammar(
        fmt,
        [fn],
        literal=factory[0].literal,
        bounds=JsonBounds.for_budget(400),
        subgrammars=sub,
        **settings,
    )
    return grammar, sub


PATCH_TOOL = Function("apply_patch", SCHEMA, CustomFormat("lark", APPLY_PATCH))


def test_hermes_call_input_follows_the_grammar(factory: tuple[GrammarFactory, Any]) -> None:
    grammar, sub = _call_grammar(factory, HermesFormat(), PATCH_TOOL)
    for patch in PATCHES:
        arguments = json.dumps({"input": patch}, ensure_ascii=False)
        text = f'<tool_call>\n{{"name": "apply_patch", "arguments": {arguments}}}\n</tool_call>'
        assert _accepts(factory, grammar, text, sub), text
    for bad in NOT_PATCHES:
        arguments = json.dumps({"input": bad}, ensure_ascii=False)
        text = f'<tool_call>\n{{"name": "apply_patch", "arguments": {arguments}}}\n</tool_call>'
        assert not _accepts(factory, grammar, text, sub), text


@pytest.mark.parametrize(
    "template", ["qwen3_coder.jinja", "devstral_small_2.jinja", "llama3.2.jinja"]
)
def test_each_family_writes_a_valid_patch_as_its_template_does(
    factory: tuple[GrammarFactory, Any], template: str
) -> None:
    fmt = format_for_template((TEMPLATES / template).read_text())
    grammar, sub = _call_grammar(factory, fmt, PATCH_TOOL, reasoning=THINK)
    good = recorded_output(template, [("apply_patch", {"input": PATCHES[0]})])
    bad = recorded_output(template, [("apply_patch", {"input": NOT_PATCHES[2]})])
    assert _accepts(factory, grammar, good, sub), good
    assert not _accepts(factory, grammar, bad, sub), bad


def test_a_regex_tool_under_auto_may_answer_or_call(factory: tuple[GrammarFactory, Any]) -> None:
    ticket = Function("open_ticket", SCHEMA, CustomFormat("regex", r"TICKET-[0-9]{3}"))
    grammar, sub = _call_grammar(factory, HermesFormat(), ticket, required=False)

    def call(value: str) -> str:
        arguments = json.dumps({"input": value})
        return f'<tool_call>\n{{"name": "open_ticket", "arguments": {arguments}}}\n</tool_call>'

    assert _accepts(factory, grammar, "hello", sub)
    assert _accepts(factory, grammar, call("TICKET-123"), sub)
    assert not _accepts(factory, grammar, call("TICKET-12"), sub)


def test_partial_input_never_splits_an_escape() -> None:
    whole = json.dumps({"input": 'a\n"b" \\ \u00e9\u0001'})
    seen = [partial_input(whole[:n]) for n in range(len(whole) + 1)]
    assert all(seen[i + 1].startswith(seen[i]) for i in range(len(seen) - 1))
    assert seen[-1] == input_of(whole) == 'a\n"b" \\ \u00e9\u0001'
    assert partial_input('{"input": "ab\\') == "ab"
    assert input_of("not json") == "not json"
