"""Forced calls in every seed format: the bundled weights behind each family's real template.

The tiny model was trained on Hermes calls only; the grammar still makes it write a valid call
in whichever format the loaded template uses, and the call streams as function_call events.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.stack import Stack
from tests.support.templates import TEMPLATES

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    },
}
TIME = {
    "type": "function",
    "name": "get_time",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
}


def _model_with_template(folder: Path, template: str) -> Path:
    shutil.copytree(BUNDLED_MODEL, folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = (TEMPLATES / template).read_text()
    config.pop("tool_parser_type", None)
    config_path.write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    "template",
    ["devstral_small_2.jinja", "mistral_v0.3.jinja", "llama3.2.jinja", "qwen3_coder.jinja"],
)
def test_forced_call_in_the_template_format(
    tmp_path: Path, make_stack: Callable[..., Stack], template: str
) -> None:
    """(Which format each template selects is checked in tests/unit/test_tool_formats.py.)"""
    stack = make_stack(_model_with_template(tmp_path / "m", template))
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    tools: list[Any] = [WEATHER, TIME]
    events = list(
        client.responses.create(
            model="m",
            input="Weather in paris for 2 days?",
            tools=tools,
            tool_choice={"type": "function", "name": "get_weather"},
            parallel_tool_calls=False,
            max_output_tokens=200,
            stream=True,
        )
    )
    kinds = [e.type for e in events]
    assert "response.output_text.delta" not in kinds, "the call never leaks as text"
    # A thinking model may stream a reasoning item first; the call is the next item.
    added = next(
        e for e in events if e.type == "response.output_item.added" and e.item.type != "reasoning"
    )
    assert added.item.type == "function_call" and added.item.name == "get_weather"
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert "".join(deltas) == done.arguments
    arguments = json.loads(done.arguments)
    assert isinstance(arguments["city"], str) and isinstance(arguments["days"], int)
    final = events[-1].response
    assert final.status == "completed"
    assert [i.type for i in final.output if i.type != "reasoning"] == ["function_call"]
