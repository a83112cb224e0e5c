"""Where a prompt's generation prompt begins: the prefix its next turn shares, whatever the
template renders after it (the reply its own way, or none)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.text.prompt import generation_start, render_prompt

MESSAGES = [
    {"role": "system", "content": "You count boats."},
    {"role": "user", "content": "How many?"},
]


@pytest.fixture(scope="module")
def tokenizer(model_path: Path) -> Any:
    return load_model(model_path).tokenizer


@pytest.mark.parametrize(
    ("kwargs", "appended"),
    [
        ({}, "<|im_start|>assistant\n"),
        ({"enable_thinking": True}, "<|im_start|>assistant\n<think>\n"),
    ],
)
def test_the_next_turn_shares_the_prompt_to_where_the_generation_prompt_begins(
    tokenizer: Any, kwargs: dict[str, Any], appended: str
) -> None:
    prompt = render_prompt(tokenizer, MESSAGES, None, kwargs, tokenizer.think_start)
    start = generation_start(tokenizer, MESSAGES, None, kwargs, prompt)
    assert tokenizer.decode(prompt.tokens[start:]) == appended
    following = [
        *MESSAGES,
        {"role": "assistant", "content": "Three."},
        {"role": "user", "content": "And yesterday?"},
    ]
    nxt = render_prompt(tokenizer, following, None, kwargs, tokenizer.think_start)
    assert nxt.tokens[:start] == prompt.tokens[:start]


def test_a_prompt_the_template_does_not_end_with_its_generation_prompt_has_none(
    tokenizer: Any,
) -> None:
    """A prompt whose text is not the conversation and a generation prompt (a raw prompt, a
    client's) is left without the checkpoint: 0."""
    prompt = render_prompt(tokenizer, MESSAGES, None, {}, None)
    other = replace(prompt, text="A raw completion prompt.", tokens=tokenizer.encode("A raw"))
    assert generation_start(tokenizer, MESSAGES, None, {}, other) == 0
    assert replace(prompt, generation_start=7).checkpoints == (7,)
