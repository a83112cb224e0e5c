"""The tiny gpt-oss's Codex and agent-tool training pieces (training/tiny_harmony): the Codex
turns render behind Codex's system turn as the server renders it, the agent-tool calls fit the
tool offered, and learning behind a prefilled cache sees what a whole forward pass sees."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import mlx.core as mx
import pytest
from mlx_lm.models import gpt_oss
from mlx_responses.service.config import BUNDLED_MODEL

from training.tiny_harmony import agent_tools, codex, prefixed
from training.tiny_harmony.tokenizer import write_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tiny-harmony")
    write_tokenizer(BUNDLED_MODEL, folder)
    return AutoTokenizer.from_pretrained(str(folder))


def test_codex_tools_are_its_functions_as_the_server_flattens_them() -> None:
    names = [t["function"]["name"] for t in codex.tools()]
    assert names[0] == codex.SHELL == "exec_command"
    assert "close_agent" in names and "spawn_agent" in names  # the namespace's, flattened
    assert "multi_agent_v1" not in names and "web_search" not in names and len(names) == 12
    cmd = codex.tools()[0]["function"]["parameters"]
    assert cmd["required"] == ["cmd"]


def test_codex_turns_render_behind_codex_system_turn(tokenizer: Any) -> None:
    rng = random.Random(3)
    home = "/tmp/t/codex-home"
    prefix = prefixed.system_turn(tokenizer, "2026-12-07", home)
    assert f"{home}/skills/.system" in prefix and "running in the Codex CLI" in prefix
    assert prefix.endswith("} // namespace functions<|end|>")
    learned = set()
    for _ in range(12):
        turn = codex.turn(rng, "2026-12-07", home)
        ids, start = prefixed.encode_turn(tokenizer, turn, prefix)
        target = tokenizer.decode(ids[start:])
        last = turn.messages[-1]
        if last.get("tool_calls"):
            function = last["tool_calls"][0]["function"]
            assert json.loads(function["arguments"])["cmd"] in target
            assert target.endswith("<|call|>") and "to=functions.exec_command" in target
            learned.add("call")
        else:
            assert target == f"<|channel|>final<|message|>{last['content']}<|return|>"
            assert turn.messages[-2]["content"].startswith("Chunk ID: ")
            learned.add("answer")
    assert learned == {"call", "answer"}


def test_agent_tool_calls_fit_the_one_tool_offered() -> None:
    rng = random.Random(5)
    for _ in range(200):
        example = agent_tools.example(rng, "2026-01-01")
        (tool,) = example.tools or []
        call = next(m for m in example.messages if m.get("tool_calls"))["tool_calls"][0]
        assert call["function"]["name"] == tool["function"]["name"]
        arguments = call["function"]["arguments"]
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        jsonschema.validate(arguments, tool["function"]["parameters"])


def test_learning_behind_a_prefilled_cache_sees_the_whole_sequence() -> None:
    """The suffix's logits behind prefixed.copies (two rows) equal a whole forward pass's,
    across the sliding layer's window and the full layer's keys."""
    mx.random.seed(0)
    args = gpt_oss.ModelArgs.from_dict(
        {
            "model_type": "gpt_oss",
            "hidden_size": 32,
            "intermediate_size": 32,
            "num_hidden_layers": 2,
            "num_local_experts": 2,
            "num_experts_per_tok": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
            "vocab_size": 64,
        }
    )
    model = gpt_oss.Model(args)
    mx.eval(model.parameters())
    prefix = [int(t) for t in mx.random.randint(0, 64, (37,))]
    suffixes = [[int(t) for t in mx.random.randint(0, 64, (11,))] for _ in range(2)]

    class Text:  # prefill's tokenizer: the prefix is its ids
        @staticmethod
        def encode(_: str, add_special_tokens: bool = False) -> list[int]:
            return prefix

    cache = prefixed.prefill(model, Text(), "")
    behind = model(mx.array(suffixes), cache=prefixed.copies(cache, 2))
    whole = model(mx.array([prefix + s for s in suffixes]))[:, len(prefix) :]
    assert float(mx.abs(behind - whole).max()) < 1e-4
    # And a gradient flows through the copies to the weights.
    loss = lambda m: m(mx.array(suffixes), cache=prefixed.copies(cache, 2)).sum()  # noqa: E731
    from mlx import nn

    _, grads = nn.value_and_grad(model, loss)(model)
    assert float(mx.abs(grads["model"]["layers"][1]["self_attn"]["q_proj"]["weight"]).sum()) > 0
