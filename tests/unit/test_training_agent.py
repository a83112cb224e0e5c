"""The long-window training pieces: PoSE position skips, their RoPE, and the agent data."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import llguidance
import mlx.core as mx
import numpy as np
import pytest
from mlx import nn

from tests.support.random_model import tiny_qwen3
from training.tiny_chat import agent
from training.tiny_chat.data import FULL_MIX, eval_prompts, train_conversations
from training.tiny_chat.template import compile_template
from training.tiny_chat.train import (
    Packed,
    PositionedRoPE,
    conversation_example,
    skip_positions,
    to_packed,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "codex_0.169_apply_patch_tool.json"


def test_positioned_rope_is_mlx_lms_rope_at_the_same_positions() -> None:
    mine, theirs = PositionedRoPE(48, 10000.0), nn.RoPE(48, traditional=False, base=10000.0)
    x = mx.random.normal((2, 4, 64, 48), key=mx.random.key(0))
    mine.positions = mx.broadcast_to(mx.arange(64)[None], (2, 64))
    assert float(mx.abs(mine(x) - theirs(x)).max()) < 1e-4
    mine.positions = mine.positions + 3000
    assert float(mx.abs(mine(x) - theirs(x, offset=3000)).max()) < 5e-3
    assert float(mx.abs(mine(x) - theirs(x)).max()) > 0.1  # the skip is seen


def _packed(rows: int, length: int) -> Packed:
    ids = [([1] * (length // 2), [3]), ([2] * (length // 2), [5])]
    return to_packed([ids] * rows, length, pad_id=0)


def test_skip_positions_shift_a_rows_tail_by_one_skip() -> None:
    packed = _packed(64, 128)
    skip_positions(packed, share=0.5, max_skip=30_000, seed=1)
    steps = np.diff(packed.positions, axis=1)
    jumps = (steps != 1).sum(axis=1)
    assert set(jumps.tolist()) <= {0, 1} and 10 < jumps.sum() < 54  # about half the rows
    assert (steps >= 1).all()  # still increasing: causal order is unchanged
    assert packed.positions.max() > 2_000  # distances beyond the row length


def test_no_skips_without_a_share() -> None:
    packed = _packed(8, 64)
    skip_positions(packed, share=0.0, max_skip=30_000, seed=1)
    assert (packed.positions == np.arange(64)).all()


@pytest.fixture(scope="module")
def codex_patch_grammar() -> str:
    definition = json.loads(FIXTURE.read_text())["tool"]["format"]["definition"]
    return str(llguidance.LLMatcher.grammar_from_lark(definition))


def test_the_trained_patch_is_one_codexs_grammar_admits(codex_patch_grammar: str) -> None:
    """Every apply_patch call the model learns is a patch Codex's own Lark grammar parses."""
    tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()))
    rng = random.Random(0)
    for prompt in eval_prompts("patch", 20):
        if prompt.variant != "patch_call":
            assert prompt.expected == agent.PATCH_DONE
            continue
        call = json.loads(prompt.expected.split("\n")[1])
        assert call["name"] == agent.APPLY_PATCH
        patch = call["arguments"]["input"]
        matcher = llguidance.LLMatcher(tokenizer, codex_patch_grammar)
        ids = list(patch.encode())
        assert matcher.validate_tokens(ids) == len(ids), patch
        matcher.consume_tokens(ids)
        assert matcher.is_accepting(), patch
    name = agent.file_name(rng, "hello")
    assert agent.patch_input(name, "hi").startswith(f"*** Begin Patch\n*** Add File: {name}\n")


def test_a_given_patch_is_the_patch_the_call_carries() -> None:
    """A request quoting its patch is answered by a call whose input is that patch, verbatim."""
    prompts = eval_prompts("patch_given", 10)
    for prompt in prompts[::2]:
        request = prompt.messages[-1]["content"]
        call = json.loads(prompt.expected.split("\n")[1])
        patch = call["arguments"]["input"]
        assert request == agent.PATCH_GIVEN[0].format(p=patch.rstrip("\n"))
    assert all(p.expected == agent.PATCH_DONE for p in prompts[1::2])


def test_codex_preamble_rows_open_as_codexs_own_request() -> None:
    """With a Codex preamble, a patch conversation is Codex's first request as the window holds
    it at the call: the tail of its developer messages, its environment context, the request."""
    mix = replace(
        FULL_MIX, kinds=(("patch_call", 1.0, 0.0), ("patch", 1.0, 0.0)), p_codex_preamble=1.0
    )
    texts = agent.codex_developer_texts()
    for conv in train_conversations(30, seed=5, mix=mix):
        msgs = conv.messages
        request = next(i for i, m in enumerate(msgs) if m["role"] == "assistant") - 1
        developers = msgs[: request - 1]
        assert developers and all(m["role"] == "developer" for m in developers)
        # each is the end of one of Codex's messages (the first may lose some leading lines)
        assert all(any(t.endswith(m["content"]) for t in texts) for m in developers)
        assert developers[-1]["content"] == texts[-1][-len(developers[-1]["content"]) :]
        assert msgs[request - 1]["content"].startswith("<environment_context>")
        assert msgs[request]["role"] == "user"  # the request: no history in between
    plain = replace(mix, p_codex_preamble=0.0)
    for conv in train_conversations(30, seed=5, mix=plain):
        assert not any(
            m["role"] == "developer" and any(t.endswith(m["content"]) for t in texts)
            for m in conv.messages
        )


def test_training_never_writes_a_patch_the_replay_asks_for() -> None:
    """The replay's cases (a file WORD.EXT of one WORD) never come up in training's patches,
    even when every file name and line is drawn from the replay's own words."""
    mix = replace(FULL_MIX, kinds=(("patch_call", 1.0, 0.0),), p_patch_given=1.0)
    seen = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(agent, "EXTENSIONS", agent.REPLAY_EXTENSIONS)
        patch.setattr("training.tiny_chat.data.Generator.copy_word", _replay_word)
        for conv in train_conversations(200, seed=3, mix=mix):
            call = json.loads(conv.turns[-1].expected.split("\n")[1])["arguments"]["input"]
            name = call.split("\n")[1].removeprefix("*** Add File: ")
            content = call.split("\n")[2].removeprefix("+")
            seen += name.partition(".")[0] in agent.REPLAY_WORDS
            assert not agent.replay_case(name, content), call
    assert seen > 100  # the names were the replay's; only the lines kept them apart


def _replay_word(self: object) -> str:
    rng = self.rng  # type: ignore[attr-defined]
    return str(rng.choice(agent.REPLAY_WORDS if rng.random() < 0.9 else ("kettle",)))


def test_the_copied_lines_of_a_patch_call_weigh_more(model_path: Path) -> None:
    """With a copy weight, the call's file name and added line are targets that many times;
    every other target, the rest of the call included, once."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_path / "tokenizer.json"))
    template = compile_template()
    mix = replace(FULL_MIX, kinds=(("patch_call", 1.0, 0.0),))
    for conv in train_conversations(4, seed=5, mix=mix):
        ids, plain = conversation_example(conv, template, tok)
        same, weighted = conversation_example(conv, template, tok, copy_weight=3)
        assert same == ids and len(set(plain)) == len(plain)
        counts = {j: weighted.count(j) for j in set(weighted)}
        assert set(counts) == set(plain) and set(counts.values()) == {1, 3}
        copied = tok.decode([ids[j] for j in sorted(j for j, n in counts.items() if n == 3)])
        call = json.loads(conv.turns[-1].expected.split("\n")[1])["arguments"]["input"]
        name, line = call.split("\n")[1].removeprefix("*** Add File: "), call.split("\n")[2]
        assert copied.replace(" ", "") == (name + line[1:]).replace(" ", "")


def test_the_environment_context_has_codexs_shape() -> None:
    """Codex 0.169's context message: the same tags in the same order, and its sandbox line."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "codex_0.169_request.json"
    items = json.loads(fixture.read_text())["body"]["input"]
    texts = [i["content"][0]["text"] for i in items if i.get("role") == "user"]
    codex = next(t for t in texts if t.startswith("<environment_context>"))
    tags = _tags(codex)
    rng = random.Random(1)
    made = [agent.environment_context(rng) for _ in range(60)]
    assert any(_tags(text) == tags for text in made)  # the sandboxed form, as Codex sends it
    assert any("<timezone>" not in text for text in made)  # and the short one
    for text in made:
        assert _tags(text) == [t for t in tags if t in _tags(text)]
        if "<filesystem>" in text:
            cwd = text.split("<cwd>")[1].split("</cwd>")[0]
            assert f"<workspace_roots><root>{cwd}</root></workspace_roots>" in text


def _tags(text: str) -> list[str]:
    """The opening tags of a context message's lines, in order."""
    return [line.strip().split(">")[0] + ">" for line in text.splitlines()]


class _ByteTokenizer:
    """One token per byte: the grammar is checked on the text alone."""

    eos_token_id = 256
    bos_token_id = None
    tokens: ClassVar[list[bytes]] = [bytes([b]) for b in range(256)] + [b"<eos>"]
    special_token_ids: ClassVar[list[int]] = [256]

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text.encode() if isinstance(text, str) else text)


def test_decoy_tools_are_agent_shaped_and_never_the_conversations_own() -> None:
    rng = random.Random(3)
    tools = agent.decoy_tools(rng, 4, taken={"exec_command"})
    names = [t["function"]["name"] for t in tools]
    assert len(names) == 4 and "exec_command" not in names
    for tool in tools:
        params = tool["function"]["parameters"]
        assert params["type"] == "object" and params["properties"]
        assert len(tool["function"]["description"]) > 10


@pytest.mark.parametrize("window", [None, 8])
def test_a_forked_preamble_cache_extends_without_touching_the_shared_one(
    window: int | None,
) -> None:
    """long_context.py prefills the preamble once and forks it per prompt, plain or rotating."""
    from mlx_lm.models.cache import KVCache, RotatingKVCache

    from training.tiny_chat.long_context import _fork

    model = tiny_qwen3(num_hidden_layers=1, max_position_embeddings=64)
    fresh = KVCache if window is None else (lambda: RotatingKVCache(window))
    tokens = mx.array([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]])
    shared = [fresh()]
    model(tokens[:, :10], cache=shared)
    before = mx.array(shared[0].keys)
    logits = model(tokens[:, 10:], cache=_fork(shared))[:, -1]
    assert shared[0].offset == 10 and bool(mx.array_equal(shared[0].keys, before))
    expected = model(tokens, cache=[fresh()])[:, -1]  # the whole prompt at once
    assert bool(mx.allclose(logits, expected, atol=1e-4))
