"""Harmony conversations for the tiny gpt-oss: reasoning then a final answer, a tool call (with or
without a preamble), a tool loop of two calls, the answer after a tool's output, and a second
turn after a finished one (its reasoning dropped, as the server renders it).

Each example is (messages, tools, target): the messages up to the turn to learn, the tools
offered, and the assistant turn as the template renders it at training time (the last assistant
message, with its `thinking`, ending in `<|return|>` or `<|call|>`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

CITIES = [
    "Paris",
    "Rome",
    "Tokyo",
    "Lima",
    "Oslo",
    "Cairo",
    "Berlin",
    "Madrid",
    "Dublin",
    "Vienna",
    "Lisbon",
    "Prague",
    "Seoul",
    "Delhi",
    "Sydney",
    "Boston",
    "Denver",
    "Austin",
    "Quito",
    "Nairobi",
    "Warsaw",
    "Athens",
    "Hanoi",
    "Manila",
    "Havana",
    "Kyoto",
]
WORDS = [
    "apple",
    "river",
    "cloud",
    "stone",
    "green",
    "music",
    "paper",
    "light",
    "ocean",
    "tiger",
    "maple",
    "silver",
    "garden",
    "winter",
    "summer",
    "orange",
    "yellow",
    "candle",
    "forest",
    "bridge",
    "rocket",
    "planet",
    "window",
    "pencil",
    "rabbit",
    "violet",
]
ZONES = ("UTC", "CET", "JST", "PST", "EST")
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@dataclass(frozen=True)
class Example:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    date: str


def _call(name: str, arguments: dict[str, str], call_id: str) -> dict[str, Any]:
    # Compact, as gpt-oss writes arguments (the template writes a string as it is).
    text = json.dumps(arguments, separators=(",", ":"))
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def _history_call(call: dict[str, Any]) -> dict[str, Any]:
    """A call as the server replays it: the arguments as an object."""
    function = call["function"]
    arguments = json.loads(function["arguments"])
    return {**call, "function": {"name": function["name"], "arguments": arguments}}


def _echo(rng: random.Random) -> list[dict[str, Any]]:
    word = rng.choice(WORDS)
    ask = rng.choice(["Say {w}.", "Reply with {w}.", "Please say {w}.", "Answer with: {w}"])
    return [
        {"role": "user", "content": ask.format(w=word)},
        {
            "role": "assistant",
            "thinking": f"The user wants {word}.",
            "content": word,
        },
    ]


def _weather_call(rng: random.Random, city: str, preamble: bool) -> list[dict[str, Any]]:
    call = _call("get_weather", {"location": city}, "c1")
    turn: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": rng.choice(["Weather in {c}?", "What is the weather in {c}?"]).format(
                c=city
            ),
        }
    ]
    if preamble:
        turn.append({"role": "assistant", "channel": "commentary", "content": "Checking."})
        turn.append({"role": "assistant", "content": "", "tool_calls": [call]})
        turn[-2]["thinking"] = "Need weather."
    else:
        turn.append(
            {"role": "assistant", "thinking": "Need weather.", "content": "", "tool_calls": [call]}
        )
    return turn


def example(rng: random.Random) -> Example:
    """One conversation whose last assistant turn is the one to learn."""
    date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    kind = rng.random()
    city = rng.choice(CITIES)
    if kind < 0.3:
        return Example(_echo(rng), None if rng.random() < 0.7 else [WEATHER], date)
    if kind < 0.55:
        tools = [WEATHER] if rng.random() < 0.6 else [WEATHER, TIME]
        return Example(_weather_call(rng, city, preamble=rng.random() < 0.3), tools, date)
    if kind < 0.75:  # the answer after the tool's output (the loop's reasoning kept)
        degrees = f"{rng.randint(-5, 35)}C"
        turn = _weather_call(rng, city, preamble=False)
        turn[-1]["tool_calls"] = [_history_call(c) for c in turn[-1]["tool_calls"]]
        turn.append({"role": "tool", "tool_call_id": "c1", "content": degrees})
        turn.append({"role": "assistant", "content": f"It is {degrees} in {city}."})
        return Example(turn, [WEATHER], date)
    if kind < 0.88:  # two calls in a loop: weather, then time
        turn = _weather_call(rng, city, preamble=False)
        turn[0]["content"] = f"Weather and time in {city}?"
        turn[-1]["tool_calls"] = [_history_call(c) for c in turn[-1]["tool_calls"]]
        turn.append({"role": "tool", "tool_call_id": "c1", "content": f"{rng.randint(0, 30)}C"})
        call = _call("get_time", {"city": city}, "c2")
        turn.append(
            {"role": "assistant", "thinking": "Need time.", "content": "", "tool_calls": [call]}
        )
        return Example(turn, [WEATHER, TIME], date)
    # A second turn after a finished one: its reasoning dropped, its answer kept.
    first = _echo(rng)
    first[-1] = {"role": "assistant", "content": first[-1]["content"]}
    return Example([*first, *_echo(rng)], None, date)
