"""Hostile JSON for the fuzz tests: values, a valid body per dialect, and random mutations of it."""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import strategies as st

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 2.0])
    | st.text(max_size=30)
    | st.sampled_from(["\ud800", "\x00", "﷐\U0010ffff", "message", "function", "user", "text"])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# Built fresh per draw: a mutation may write into them, and a shared one could contain itself.
huge_values = st.sampled_from(
    [
        lambda: "x" * 200_000,
        lambda: "€" * 100_000,
        lambda: "\U0001f600" * 50_000,
        lambda: ["Reply"] * 50_000,
        lambda: [{"type": "message", "role": "user", "content": "a"} for _ in range(3000)],
        lambda: {str(i): i for i in range(20_000)},
    ]
).map(lambda build: build())


def _deep(depth: int, kind: str) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if kind == "list" else {"type": "object", "properties": {"a": value}}
    return value


deep_values = st.builds(
    _deep, st.sampled_from([50, 120, 400, 900]), st.sampled_from(["list", "dict"])
)
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def responses_body(model: str) -> dict[str, Any]:
    """POST /v1/responses (and input_tokens, compact)."""
    return {
        "model": model,
        "input": [
            {"type": "message", "role": "user", "content": "Reply with: hi"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "max_output_tokens": 4,
        "temperature": 0,
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA}],
        "text": {"format": {"type": "text"}},
        "metadata": {"k": "v"},
        "store": True,
    }


def messages_body(model: str) -> dict[str, Any]:
    """POST /v1/messages (and count_tokens)."""
    return {
        "model": model,
        "max_tokens": 4,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Use the tool.", "signature": "s"},
                    {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"c": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "sunny"}],
                        "is_error": False,
                    }
                ],
            },
        ],
        "tools": [{"name": "get_weather", "description": "d", "input_schema": WEATHER_SCHEMA}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 8},
        "metadata": {"user_id": "u"},
        "stop_sequences": ["\n\n"],
        "temperature": 0,
        "top_k": 3,
    }


def chat_body(model: str) -> dict[str, Any]:
    """POST /v1/chat/completions."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Use the tool.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}
        ],
        "tool_choice": "auto",
        "response_format": {"type": "text"},
        "max_tokens": 4,
        "temperature": 0,
        "stop": ["\n\n"],
        "seed": 1,
        "n": 1,
        "logprobs": True,
        "top_logprobs": 2,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": False},
    }


def completion_body(model: str) -> dict[str, Any]:
    """POST /v1/completions."""
    return {
        "model": model,
        "prompt": ["The sea", "The sky"],
        "max_tokens": 4,
        "temperature": 0,
        "n": 1,
        "best_of": 1,
        "logprobs": 2,
        "echo": False,
        "stop": "\n",
        "user": "u",
        "stream_options": {"include_usage": True},
    }


def conversation_body(model: str) -> dict[str, Any]:
    """POST /v1/conversations (and .../items)."""
    del model
    return {
        "items": [
            {"type": "message", "role": "user", "content": "hi", "status": "completed"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [{"text": "sunny"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]},
        ],
        "metadata": {"k": "v"},
    }


@st.composite
def mutated(draw: st.DrawFn, body: dict[str, Any], *, big: bool = True) -> Any:
    """`body` with one to three mutations at random paths (a copy; `big`: huge and deep values)."""
    body = copy.deepcopy(body)
    ops = ["replace", "replace", "delete", "add", *(["huge", "deep"] if big else [])]
    for _ in range(draw(st.integers(1, 3))):
        # Walk to a random container inside the body.
        node: Any = body
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            child = node[draw(st.sampled_from(keys))]
            if not isinstance(child, (dict, list)):
                break
            node = child
        op = draw(st.sampled_from(ops))
        value = draw(huge_values if op == "huge" else deep_values if op == "deep" else json_values)
        if isinstance(node, dict):
            key = (
                draw(st.text(max_size=12))
                if op == "add" or not node
                else draw(st.sampled_from(list(node)))
            )
            if op == "delete":
                node.pop(key, None)
            else:
                node[key] = value
        elif node:
            index = draw(st.integers(0, len(node) - 1))
            if op == "delete":
                node.pop(index)
            else:
                node[index] = value
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)  # the whole body replaced: a scalar, an array...
    return body
