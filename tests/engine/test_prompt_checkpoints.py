"""Checkpoints of the whole cache, for models whose caches cannot be trimmed back: a Qwen3.5
(recurrent gated-delta state beside attention), a gpt-oss (128-token rotating windows) and a
Gemma 3 (rotating windows), each past its window, under a system prompt of over 2,000 tokens.

Prompts are rendered as the server renders them (the bundled chat template, thinking on: its
generation prompt is Qwen3.5's `<|im_start|>assistant\\n<think>\\n`) with the checkpoints the
server passes (the system turn's end, where the generation prompt begins). Each warm output is
compared token for token with the same prompt served cold (no prompt cache).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.memory.budget import MemoryBudget
from mlx_responses.service.engine.mlx_lm_compat import can_trim_prompt_cache
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.text.prompt import generation_start, render_prompt, system_turn_end

from tests.support.shaped_models import build_shaped

MODELS = ["qwen3_5", "gpt_oss", "gemma3_text"]
TOKENS = 12
KWARGS = {"enable_thinking": True}
WORDS = [
    "harbour",
    "nets",
    "baker",
    "ovens",
    "children",
    "pier",
    "boats",
    "tide",
    "storms",
    "ships",
    "lights",
    "water",
    "village",
    "fisherman",
    "stories",
    "lantern",
    "rope",
    "sail",
    "anchor",
    "gull",
]
# Over 2,000 tokens, varied (a repeated sentence would make a random model's output trivial).
SYSTEM = "You are the harbour's agent. " + " ".join(
    WORDS[(i * 7 + i // 3) % len(WORDS)] for i in range(520)
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "tide",
            "description": "The tide at a harbour.",
            "parameters": {"type": "object", "properties": {"harbour": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`model_type` -> its shaped model, built on first use."""
    root = tmp_path_factory.mktemp("shaped")
    built: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type not in built:
            built[model_type] = build_shaped(model_type, root / model_type)
        return built[model_type]

    return get


class Prompt:
    """A conversation rendered as the server renders it, with its checkpoints."""

    def __init__(
        self, tokenizer: Any, messages: list[dict[str, Any]], tools: list[Any] | None = None
    ) -> None:
        rendered = render_prompt(tokenizer, messages, tools, KWARGS, tokenizer.think_start)
        self.system_end = system_turn_end(tokenizer, messages, tools, KWARGS, rendered.tokens)
        self.start = generation_start(tokenizer, messages, tools, KWARGS, rendered)
        rendered = replace(rendered, system_end=self.system_end, generation_start=self.start)
        self.tokens = rendered.tokens
        self.checkpoints = rendered.checkpoints
        self.messages = messages


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


async def _serve(engine: EngineWorker, prompts: list[Prompt]) -> list[tuple[tuple[int, ...], int]]:
    """`prompts` submitted together: each one's greedy ids and the tokens its cache served."""
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)

    async def one(prompt: Prompt) -> tuple[tuple[int, ...], int]:
        ids: tuple[int, ...] = ()
        cached = -1
        stream = engine.submit(prompt.tokens, sampling, (), prompt.checkpoints)
        async for chunks in stream.batches():
            for chunk in chunks:
                assert chunk.finish_reason in (None, "stop", "length"), chunk.error
                cached = chunk.cached_tokens if cached < 0 else cached
                ids += chunk.token_ids
        return ids, cached

    return list(await asyncio.gather(*(one(p) for p in prompts)))


async def _cold(path: Path, prompts: list[Prompt]) -> list[tuple[int, ...]]:
    """Each prompt served alone, without a prompt cache."""
    engine = EngineWorker(lambda: load_model(path), prompt_cache_max_entries=0)
    await engine.start()
    try:
        return [(await _serve(engine, [p]))[0][0] for p in prompts]
    finally:
        engine.stop()


def _reply(tokenizer: Any, ids: tuple[int, ...]) -> str:
    """A reply as a client sends it back: its text (the template renders it its own way)."""
    return str(tokenizer.decode(list(ids))).replace("<think>", "").replace("</think>", "")


# `auto` (mlx-lm's batch for these, solo in front), and gpt-oss's mixed windows on the slots.
PATHS = [(m, "auto") for m in MODELS] + [("gpt_oss", "slots")]


@pytest.mark.parametrize(("model_type", "engine_kind"), PATHS)
async def test_a_conversation_reads_its_checkpoints(
    shaped: Callable[[str], Path], model_type: str, engine_kind: str
) -> None:
    """One engine, one request at a time: a repeat reads all but its last token, a second turn
    at least the first prompt less its generation prompt, a new conversation the system
    prompt, a tool loop's next request the whole previous prompt; each decodes as cold."""
    path = shaped(model_type)
    tokenizer = load_model(path).tokenizer
    engine = EngineWorker(lambda: load_model(path), engine=engine_kind)
    await engine.start()
    try:
        first = Prompt(tokenizer, _user("Where is the harbour?"))
        assert len(first.tokens) > 2000 and 0 < first.system_end < first.start
        ((out, cold),) = await _serve(engine, [first])
        ((again, repeat),) = await _serve(engine, [first])
        second = Prompt(
            tokenizer,
            [
                *first.messages,
                {"role": "assistant", "content": _reply(tokenizer, out)},
                {"role": "user", "content": "And the boats?"},
            ],
        )
        ((turn, next_turn),) = await _serve(engine, [second])
        other = Prompt(tokenizer, _user("Who bakes the bread?"))
        ((new, new_conversation),) = await _serve(engine, [other])
        tool_turn = Prompt(tokenizer, _user("What is the tide?"), TOOLS)
        await _serve(engine, [tool_turn])
        call = {"function": {"name": "tide", "arguments": {"harbour": "north"}}}
        looped = Prompt(
            tokenizer,
            [
                *tool_turn.messages,
                {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "The tide tool knows.",
                    "tool_calls": [call],
                },
                {"role": "tool", "content": '{"tide": "high"}'},
            ],
            TOOLS,
        )
        ((loop, tool_loop),) = await _serve(engine, [looped])
    finally:
        engine.stop()
    assert cold == 0
    assert repeat == len(first.tokens) - 1
    assert next_turn >= first.start
    assert new_conversation >= other.system_end
    assert tool_loop >= len(tool_turn.tokens)
    assert looped.tokens[: len(tool_turn.tokens)] == tool_turn.tokens
    assert [out, turn, new, loop] == await _cold(path, [first, second, other, looped])
    assert again == out


@pytest.mark.parametrize("model_type", MODELS)
async def test_batched_conversations_hit_their_own_checkpoints(
    shaped: Callable[[str], Path], model_type: str
) -> None:
    """Four conversations' first turns in one batch (their checkpoints taken there), then two
    second turns together and two alone: each reads its own first prompt (less its generation
    prompt) and decodes as cold."""
    path = shaped(model_type)
    tokenizer = load_model(path).tokenizer
    questions = ["Where is the harbour?", "Who bakes?", "How many boats?", "Is it stormy?"]
    firsts = [Prompt(tokenizer, _user(q)) for q in questions]
    engine = EngineWorker(lambda: load_model(path), engine="auto")
    await engine.start()
    try:
        outs = await _serve(engine, firsts)
        assert engine.stats.max_batch_seen == 4
        seconds = [
            Prompt(
                tokenizer,
                [
                    *p.messages,
                    {"role": "assistant", "content": _reply(tokenizer, ids)},
                    {"role": "user", "content": f"And then, {i}?"},
                ],
            )
            for i, (p, (ids, _)) in enumerate(zip(firsts, outs, strict=True))
        ]
        together = await _serve(engine, seconds[:2])
        alone = [(await _serve(engine, [p]))[0] for p in seconds[2:]]
    finally:
        engine.stop()
    warm = [*together, *alone]
    for first, (_, cached) in zip(firsts, warm, strict=True):
        # Its own: past the system prompt all four share, into its own question.
        assert cached >= first.start > first.system_end
    assert [ids for ids, _ in warm] == await _cold(path, seconds)


@pytest.mark.parametrize("model_type", MODELS)
async def test_a_restart_reads_the_checkpoints_from_disk(
    shaped: Callable[[str], Path], model_type: str, tmp_path: Path
) -> None:
    """The checkpoints go to the disk tier like any entry: after a restart, a second turn and a
    new conversation read them from there and decode as cold."""
    path = shaped(model_type)
    tokenizer = load_model(path).tokenizer
    disk = {"prompt_cache_dir": tmp_path, "prompt_cache_disk_bytes": 1 << 30}
    first = Prompt(tokenizer, _user("Where is the harbour?"))
    engine = EngineWorker(lambda: load_model(path), engine="auto", **disk)
    await engine.start()
    try:
        ((out, _),) = await _serve(engine, [first])
    finally:
        engine.stop()
    second = Prompt(
        tokenizer,
        [
            *first.messages,
            {"role": "assistant", "content": _reply(tokenizer, out)},
            {"role": "user", "content": "And the boats?"},
        ],
    )
    other = Prompt(tokenizer, _user("Who bakes the bread?"))
    restarted = EngineWorker(lambda: load_model(path), engine="auto", **disk)
    await restarted.start()
    try:
        ((turn, next_turn),) = await _serve(restarted, [second])
        ((new, new_conversation),) = await _serve(restarted, [other])
        assert restarted.kv.prompt is not None and restarted.kv.prompt.disk is not None
        assert restarted.kv.prompt.disk.hits == 2
    finally:
        restarted.stop()
    assert next_turn >= first.start and new_conversation >= other.system_end
    assert [turn, new] == await _cold(path, [second, other])


async def test_checkpoints_are_counted_in_the_memory_budget_and_trimmed(
    shaped: Callable[[str], Path],
) -> None:
    """A Qwen3.5's checkpoints (attention KV and recurrent state) are the prompt cache's bytes
    in the model's account; short of memory, they are trimmed."""
    path = shaped("qwen3_5")
    tokenizer = load_model(path).tokenizer
    budget = MemoryBudget(1 << 40, measure_runtime=lambda: 0)
    engine = EngineWorker(lambda: load_model(path), engine="auto", memory=budget)
    await engine.start()
    try:
        await _serve(engine, [Prompt(tokenizer, _user("Where is the harbour?"))])
        kv = engine.kv
        assert kv.prompt is not None and kv.account is not None
        entries = [e.prompt_cache for e in _entries(kv.prompt.memory.lru._trie._trie)]
        assert any(not can_trim_prompt_cache(cache) for cache in entries)
        held = sum(c.nbytes for cache in entries for c in cache)
        assert held > 0 and kv.account.prompt_cache == kv.prompt.memory.nbytes == held
        kv.settle(kv.prompt.max_bytes - held // 2)  # what the live sequences hold leaves less
        assert 0 < len(kv.prompt.memory) < len(entries)
        assert kv.account.prompt_cache == kv.prompt.memory.nbytes <= held // 2
    finally:
        engine.stop()


def _entries(root: dict[Any, Any]) -> list[Any]:
    """Every entry of mlx-lm's prompt trie (nested dicts, one level a token)."""
    found, nodes = [], [root]
    while nodes:
        node = nodes.pop()
        found += [node["__value__"]] if "__value__" in node else []
        nodes += [child for key, child in node.items() if key != "__value__"]
    return found


async def test_a_prompt_edited_inside_reads_the_last_interval_checkpoint_before(
    shaped: Callable[[str], Path],
) -> None:
    """A long prompt's prefill also stops every `checkpoint_interval` tokens: a prompt that
    parts from it inside (an edit, a compaction) reads the last such entry before the change,
    and decodes as cold."""
    path = shaped("qwen3_5")
    tokenizer = load_model(path).tokenizer
    long = Prompt(tokenizer, _user("Where is the harbour?"))
    edited = copy.copy(long)
    edited.tokens, edited.checkpoints = [*long.tokens[:1500], *tokenizer.encode(" Who?")], ()
    engine = EngineWorker(lambda: load_model(path), engine="auto", checkpoint_interval=512)
    await engine.start()
    try:
        await _serve(engine, [long])
        ((out, cached),) = await _serve(engine, [edited])
    finally:
        engine.stop()
    assert cached == 1024
    assert [out] == await _cold(path, [edited])


async def test_many_turns_leave_the_system_turn_checkpoint(
    shaped: Callable[[str], Path],
) -> None:
    """Under a bound of 8 entries, a conversation's turns leave four or five each: the entries
    are evicted by kind (mlx-lm's), finished turns and other checkpoints before the system
    turn's, so a new conversation still reads the system prompt."""
    path = shaped("qwen3_5")
    tokenizer = load_model(path).tokenizer
    engine = EngineWorker(lambda: load_model(path), engine="auto", prompt_cache_max_entries=8)
    await engine.start()
    try:
        messages = _user("Where is the harbour?")
        for i in range(4):
            prompt = Prompt(tokenizer, messages)
            ((ids, _),) = await _serve(engine, [prompt])
            reply = {"role": "assistant", "content": _reply(tokenizer, ids)}
            messages = [*messages, reply, {"role": "user", "content": f"And then, {i}?"}]
        kept = engine.stats.prompt_checkpoints + engine.stats.completed
        assert engine.kv.prompt is not None and len(engine.kv.prompt.memory) == 8 < kept
        other = Prompt(tokenizer, _user("Who bakes the bread?"))
        ((_, cached),) = await _serve(engine, [other])
    finally:
        engine.stop()
    assert cached >= other.system_end
