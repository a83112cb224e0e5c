"""Which thought a forced call's grammar allows: only one the chat template renders."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.text.grammars import GrammarFactory
from mlx_responses.service.text.prompt import RenderedPrompt
from mlx_responses.service.text.tool_choice import ToolConstraints
from mlx_responses.service.text.tool_formats import HermesFormat
from mlx_responses.service.text.tool_grammar import Reasoning
from transformers import AutoTokenizer

PROMPT = RenderedPrompt(text="", tokens=[], opens_reasoning=False)


def _constraints(template: str) -> ToolConstraints:
    hf = AutoTokenizer.from_pretrained(BUNDLED_MODEL)
    hf.chat_template = template
    tokenizer = SimpleNamespace(think_start="<think>", think_end="</think>", _tokenizer=hf)
    return ToolConstraints(HermesFormat(), GrammarFactory(hf, len(hf)), tokenizer)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ '<think>\\n' }}{{ messages }}", Reasoning("<think>", "</think>", opened=False)),
        ("{{ messages }}", None),
    ],
    ids=["renders-think", "foreign-template"],
)
def test_a_thought_only_where_the_template_renders_one(
    template: str, expected: Reasoning | None
) -> None:
    assert _constraints(template)._reasoning(PROMPT) == expected
