"""Grammar-enforced tool_choice and json_schema on a harmony model: the call on the commentary
channel to `functions.NAME`, the schema on the final channel, reasoning and a preamble before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.text.grammars import GrammarFactory
from mlx_responses.service.text.harmony import harmony_format
from mlx_responses.service.text.json_bounds import JsonBounds
from mlx_responses.service.text.tool_grammar import Function, tool_grammar

from training.tiny_harmony.tokenizer import write_tokenizer

WEATHER = {
    "type": "object",
    "properties": {"location": {"type": "string"}},
    "required": ["location"],
}
THOUGHT = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
PREAMBLE = "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant"
CALL = (
    "<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"location":"Paris"}<|call|>'
)
# The end token (<|return|>) ends generation where the grammar accepts.
FINAL = "<|channel|>final<|message|>It is sunny."


@pytest.fixture(scope="module")
def factory(tmp_path_factory: pytest.TempPathFactory) -> tuple[GrammarFactory, Any]:
    from transformers import AutoTokenizer

    folder: Path = tmp_path_factory.mktemp("harmony-grammar")
    write_tokenizer(BUNDLED_MODEL, folder)
    hf = AutoTokenizer.from_pretrained(str(folder))
    return GrammarFactory(hf, len(hf)), hf


def _grammar(factory: tuple[GrammarFactory, Any], **options: Any) -> str:
    fmt = harmony_format(factory[1])
    assert fmt is not None
    settings: dict[str, Any] = {"required": True, "parallel": True}
    settings.update(options)
    functions = settings.pop("functions", [Function("get_weather", WEATHER)])
    return tool_grammar(
        fmt, functions, literal=factory[0].literal, bounds=JsonBounds.for_budget(400), **settings
    )


def _accepts(factory: tuple[GrammarFactory, Any], grammar: str, text: str) -> bool:
    grammars, hf = factory
    matcher = grammars.lark(grammar).matcher
    tokens = hf.encode(text, add_special_tokens=False)
    if matcher.validate_tokens(tokens) != len(tokens):
        return False
    matcher.consume_tokens(tokens)
    return bool(matcher.is_accepting())


def test_a_required_call(factory: tuple[GrammarFactory, Any]) -> None:
    grammar = _grammar(factory)
    assert _accepts(factory, grammar, CALL)
    assert _accepts(factory, grammar, THOUGHT + PREAMBLE + CALL)
    assert not _accepts(factory, grammar, FINAL)
    assert not _accepts(factory, grammar, CALL.replace("Paris", '"'))
    assert not _accepts(factory, grammar, CALL.replace('"location"', '"city"'))
    other = _grammar(factory, functions=[Function("get_time", {"type": "object"})])
    assert not _accepts(factory, other, CALL)


def test_auto_allows_a_final_answer(factory: tuple[GrammarFactory, Any]) -> None:
    grammar = _grammar(factory, required=False)
    assert _accepts(factory, grammar, THOUGHT + FINAL)
    assert _accepts(factory, grammar, THOUGHT + CALL)
    assert not _accepts(factory, grammar, CALL.replace("get_weather", "get_time"))


def test_json_schema_on_the_final_channel(factory: tuple[GrammarFactory, Any]) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    grammar = _grammar(factory, functions=[], required=False, answer_schema=schema)
    assert _accepts(factory, grammar, THOUGHT + '<|channel|>final<|message|>{"a":1}')
    assert not _accepts(factory, grammar, THOUGHT + FINAL)
