"""Held-out scores of the tiny gpt-oss, greedy, read as the server reads it (HarmonyReader).

    python -m training.tiny_harmony.evaluate service/assets/tiny-gpt-oss [--codex N]

`echo`: "Say WORD." gives a reasoning item then the message WORD; `call`: "Weather in CITY?"
with the weather tool gives a reasoning item then get_weather({"location": CITY}); `agents`: a
request for one of the compatibility test's tools (agent_tools.py's shapes, a request in its
own words), that tool offered alone, gives a reasoning item then a call of it whose arguments
are JSON naming only its parameters and all the required ones. `codex` (behind Codex's whole
~18.4k-token system turn, words and work dirs training never echoed): "run echo WORD" gives a
call exec_command({"cmd": "echo WORD"}); `codex_answer`: after Codex's output of that command,
a message and no call.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
from pathlib import Path
from typing import Any

from training.tiny_harmony import agent_tools, codex
from training.tiny_harmony.data import CITIES, WEATHER, WORDS


def _read(tokenizer: Any, ids: list[int], names: tuple[str, ...]) -> list[Any]:
    from mlx_responses.service.text.harmony import HarmonyTokens
    from mlx_responses.service.text.harmony_reader import HarmonyReader

    table = HarmonyTokens.of(tokenizer)
    assert table is not None
    reader = HarmonyReader(table, tokenizer, names)
    return [*reader.feed(ids), *reader.finish()]


def _generate(
    model: Any, tokenizer: Any, prompt: Any, cache: Any = None, max_tokens: int = 48
) -> list[int]:
    from mlx_lm.generate import stream_generate
    from mlx_responses.service.text.harmony import add_stops

    add_stops(tokenizer)
    kwargs = {"prompt_cache": cache} if cache is not None else {}
    return [
        r.token for r in stream_generate(model, tokenizer, prompt, max_tokens=max_tokens, **kwargs)
    ]


def _turn(model: Any, tokenizer: Any, messages: list[dict[str, Any]], tools: Any) -> list[Any]:
    prompt = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True)
    names = tuple(t["function"]["name"] for t in tools or [])
    return _read(tokenizer, _generate(model, tokenizer, prompt), names or ("get_weather",))


def _calls(segments: list[Any]) -> list[tuple[str, Any]]:
    """The calls read, as (name, parsed arguments or None)."""
    from mlx_responses.service.text.output_parser import Channel

    out: list[tuple[str, Any]] = []
    for segment in segments:
        if segment.channel is Channel.TOOL_CALL:
            name, _, arguments = segment.text.partition("\n")
            parsed = None
            with contextlib.suppress(ValueError):
                parsed = json.loads(arguments)
            out.append((name, parsed))
    return out


def _fits(arguments: Any, tool: dict[str, Any]) -> bool:
    params = tool["function"]["parameters"]
    if not isinstance(arguments, dict):
        return False
    known = set(params.get("properties") or {})
    return set(arguments) <= known and set(params.get("required") or []) <= set(arguments)


def scores(folder: Path, n: int = 20, seed: int = 1) -> dict[str, float]:
    from mlx_lm import load
    from mlx_responses.service.text.output_parser import Channel

    model, tokenizer = load(str(folder))[:2]
    rng = random.Random(seed)
    other = random.Random(seed + 1)  # the agents' draws leave echo's and call's as they were
    echo = call = agents = 0
    for _ in range(n):
        word = rng.choice(WORDS)
        segments = _turn(model, tokenizer, [{"role": "user", "content": f"Say {word}."}], None)
        kinds = [s.channel for s in segments if s.channel is not Channel.BOUNDARY]
        texts = [s.text for s in segments if s.channel is Channel.TEXT]
        echo += kinds == [Channel.REASONING, Channel.TEXT] and texts == [word]
        city = rng.choice(CITIES)
        segments = _turn(
            model, tokenizer, [{"role": "user", "content": f"Weather in {city}?"}], [WEATHER]
        )
        call += _calls(segments) == [("get_weather", {"location": city})]
        name = other.choice(list(agent_tools.KINDS))
        ask = agent_tools.KINDS[name](other)[0]
        tool = agent_tools.TOOLS[name]
        segments = _turn(model, tokenizer, [{"role": "user", "content": ask}], [tool])
        made = _calls(segments)
        agents += (
            bool(segments)
            and segments[0].channel is Channel.REASONING
            and len(made) == 1
            and made[0][0] == name
            and _fits(made[0][1], tool)
        )
    return {"echo": echo / n, "call": call / n, "agents": agents / n}


def codex_scores(folder: Path, n: int, seed: int = 1) -> dict[str, float]:
    """The Codex turn and the answer after its output, behind Codex's system turn."""
    from mlx_lm import load
    from mlx_responses.service.text.output_parser import Channel

    from training.tiny_harmony import prefixed

    model, tokenizer = load(str(folder))[:2]
    rng = random.Random(seed)
    names = tuple(t["function"]["name"] for t in codex.tools())
    date, home = "2026-12-07", "/tmp/pytest-of-root/pytest-7/test_codex_runs0/codex-home"
    text = prefixed.system_turn(tokenizer, date, home)
    system = prefixed.prefill(model, tokenizer, text)
    called = answered = calls = answers = 0
    for i in range(n):
        word = codex.HELD_OUT[i % len(codex.HELD_OUT)]
        turn = codex.turn(rng, date, home, words=(word,))
        last = max(k for k, m in enumerate(turn.messages) if m["role"] != "assistant")
        messages = turn.messages[: last + 1]
        prompt = tokenizer.apply_chat_template(
            messages, tools=codex.tools(), add_generation_prompt=True, tokenize=False,
            current_date=date,
        )  # fmt: skip
        ids = tokenizer.encode(prompt[len(text) :], add_special_tokens=False)
        made = _read(
            tokenizer, _generate(model, tokenizer, ids, prefixed.copies(system, 1), 96), names
        )
        if messages[-1]["role"] == "tool":
            kinds = [s.channel for s in made if s.channel is not Channel.BOUNDARY]
            answers += 1
            answered += bool(kinds) and kinds[-1] is Channel.TEXT and not _calls(made)
        else:
            wanted = turn.messages[-1]["tool_calls"][0]["function"]["arguments"]
            calls += 1
            called += _calls(made) == [(codex.SHELL, json.loads(wanted))]
    return {"codex": called / max(calls, 1), "codex_answer": answered / max(answers, 1)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--codex", type=int, default=0, help="Codex turns to score (slow)")
    args = parser.parse_args()
    print(scores(args.folder))
    if args.codex:
        print(codex_scores(args.folder, args.codex))
