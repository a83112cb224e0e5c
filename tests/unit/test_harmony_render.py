"""Harmony prompts through gpt-oss's own template (tests/fixtures/chat_templates/gpt_oss.jinja)
and the tiny model's: the items a client sends map onto the analysis channel by harmony's rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.text.harmony import harmony_messages, is_harmony
from mlx_responses.service.text.prompt import items_to_messages, render_prompt, tools_to_template

from mlx_responses.v1 import responses_pb2 as pb
from tests.support.templates import TEMPLATES
from training.tiny_harmony.tokenizer import write_tokenizer

WEATHER = {"type": "object", "properties": {"location": {"type": "string"}}}


def _tokenizer(folder: Path, template: str | None) -> Any:
    from mlx_lm.tokenizer_utils import TokenizerWrapper
    from transformers import AutoTokenizer

    write_tokenizer(BUNDLED_MODEL, folder)
    if template is not None:
        config = json.loads((folder / "tokenizer_config.json").read_text())
        config["chat_template"] = (TEMPLATES / template).read_text()
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return TokenizerWrapper(AutoTokenizer.from_pretrained(str(folder)))


@pytest.fixture(scope="module", params=["gpt_oss.jinja", None], ids=["gpt-oss", "tiny"])
def tokenizer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _tokenizer(tmp_path_factory.mktemp("harmony"), request.param)


def _user(text: str) -> pb.Item:
    part = pb.ContentPart(input_text=pb.InputText(text=text))
    return pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[part]))


def _assistant(text: str) -> pb.Item:
    part = pb.ContentPart(output_text=pb.OutputText(text=text))
    return pb.Item(message=pb.MessageItem(role=pb.ROLE_ASSISTANT, content=[part]))


def _reasoning(text: str) -> pb.Item:
    return pb.Item(reasoning=pb.ReasoningItem(content=[pb.ReasoningText(text=text)]))


CALL = pb.Item(
    function_call=pb.FunctionCallItem(
        call_id="c1", name="get_weather", arguments='{"location": "Paris"}'
    )
)
OUTPUT = pb.Item(function_call_output=pb.FunctionCallOutputItem(call_id="c1", output="20C"))


def render(tokenizer: Any, items: list[pb.Item]) -> str:
    tool = pb.Tool(function=pb.FunctionTool(name="get_weather"))
    messages = harmony_messages(items_to_messages(None, items))
    tools = tools_to_template([tool], {"get_weather": WEATHER})
    return render_prompt(tokenizer, messages, tools, {}, None).text


def test_both_templates_are_harmony(tokenizer: Any) -> None:
    assert is_harmony(tokenizer)


def test_a_tool_loop_keeps_its_reasoning(tokenizer: Any) -> None:
    text = render(tokenizer, [_user("Weather?"), _reasoning("Need weather."), CALL, OUTPUT])
    analysis = "<|start|>assistant<|channel|>analysis<|message|>Need weather.<|end|>"
    assert analysis in text
    call = text.index("to=functions.get_weather", text.index(analysis))
    assert text.index("<|start|>functions.get_weather to=assistant", call)
    assert text.endswith("<|end|><|start|>assistant")


def test_a_finished_turn_drops_its_reasoning(tokenizer: Any) -> None:
    items = [_user("2+2?"), _reasoning("Simple."), _assistant("4"), _user("and 3+3?")]
    text = render(tokenizer, items)
    assert "Simple." not in text
    assert "<|start|>assistant<|channel|>final<|message|>4<|end|>" in text
    assert "<|return|>" not in text
    loop = [_user("Weather?"), _reasoning("Need weather."), CALL, OUTPUT]
    after = render(tokenizer, [*loop, _reasoning("Got it."), _assistant("20C."), _user("Rome?")])
    assert "Need weather." not in after and "Got it." not in after
