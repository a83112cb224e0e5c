"""Held-out scores of the tiny gpt-oss, greedy, read as the server reads it (HarmonyReader).

    python -m training.tiny_harmony.evaluate service/assets/tiny-gpt-oss

`echo`: "Say WORD." gives a reasoning item then the message WORD; `call`: "Weather in CITY?"
with the weather tool gives a reasoning item then get_weather({"location": CITY}).
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
from pathlib import Path
from typing import Any

from training.tiny_harmony.data import CITIES, WEATHER, WORDS


def _turn(model: Any, tokenizer: Any, messages: list[dict[str, Any]], tools: Any) -> list[Any]:
    from mlx_lm.generate import stream_generate
    from mlx_responses.service.text.harmony import HarmonyTokens, add_stops
    from mlx_responses.service.text.harmony_reader import HarmonyReader

    add_stops(tokenizer)
    prompt = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True)
    ids: list[int] = []
    for response in stream_generate(model, tokenizer, prompt, max_tokens=48):
        ids.append(response.token)
    table = HarmonyTokens.of(tokenizer)
    assert table is not None
    reader = HarmonyReader(table, tokenizer, ("get_weather",))
    return [*reader.feed(ids), *reader.finish()]


def scores(folder: Path, n: int = 20, seed: int = 1) -> dict[str, float]:
    from mlx_lm import load
    from mlx_responses.service.text.output_parser import Channel

    model, tokenizer = load(str(folder))[:2]
    rng = random.Random(seed)
    echo = call = 0
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
        spans = [s.text for s in segments if s.channel is Channel.TOOL_CALL]
        if len(spans) == 1:
            name, _, arguments = spans[0].partition("\n")
            with contextlib.suppress(ValueError):
                call += name == "get_weather" and json.loads(arguments) == {"location": city}
    return {"echo": echo / n, "call": call / n}


if __name__ == "__main__":
    print(scores(Path(sys.argv[1])))
