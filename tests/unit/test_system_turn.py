"""Where a prompt's leading system turn ends: the prefix a new conversation under it shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.text.prompt import render_prompt, system_turn_end

TOOLS = [{"type": "function", "function": {"name": "count", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def tokenizer(model_path: Path) -> Any:
    return load_model(model_path).tokenizer


def _end(tokenizer: Any, system: str | None, user: str, tools: Any = None) -> tuple[int, Any]:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    prompt = render_prompt(tokenizer, messages, tools, {}, None)
    return system_turn_end(tokenizer, messages, tools, {}, prompt.tokens), prompt


@pytest.mark.parametrize("tools", [None, TOOLS])
def test_conversations_under_one_system_turn_share_up_to_its_end(
    tokenizer: Any, tools: Any
) -> None:
    end, first = _end(tokenizer, "You count boats.", "How many?", tools)
    again, second = _end(tokenizer, "You count boats.", "And yesterday?", tools)
    assert end == again and first.tokens[:end] == second.tokens[:end]
    assert first.tokens[end] != second.tokens[end]  # they part right after it
    # The system turn and the next turn's opening, not the user's words.
    assert first.text.startswith(tokenizer.decode(first.tokens[:end]))
    assert "boats" in tokenizer.decode(first.tokens[:end])
    assert "How" not in tokenizer.decode(first.tokens[:end])


def test_tools_alone_make_a_system_turn(tokenizer: Any) -> None:
    end, prompt = _end(tokenizer, None, "How many?", TOOLS)
    assert '"count"' in tokenizer.decode(prompt.tokens[:end])


def test_no_system_turn_no_tools_nothing_to_share(tokenizer: Any) -> None:
    assert _end(tokenizer, None, "How many?")[0] == 0
