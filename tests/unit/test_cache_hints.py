"""The decoders read the clients' cache breakpoints into `CreateResponseParams.cache_breakpoints`:
Anthropic `cache_control` and OpenAI `prompt_cache_breakpoint`, each as a point in the input
items (after a message's text up to the marked block, or after an item) or after a tool.

The core's side, the token positions those points end at on a model's template, is tested
here too, on the bundled model's tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlx_responses.http_facade.anthropic.to_proto import messages_from_json
from mlx_responses.http_facade.chat.to_proto import chat_from_json
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.responses.to_proto import item_from_json, params_from_json
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.text.cache_breakpoints import (
    MAX_BREAKPOINTS,
    breakpoint_positions,
    resolve_marks,
)
from mlx_responses.service.text.prompt import items_to_messages, render_prompt

from mlx_responses.v1 import responses_pb2 as pb

MARK: Any = {"type": "ephemeral"}
EXPLICIT: Any = {"mode": "explicit"}


def _points(params: pb.CreateResponseParams) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for point in params.cache_breakpoints:
        if point.WhichOneof("at") == "tool":
            out.append(("tool", point.tool))
        else:
            chars = point.input.chars if point.input.HasField("chars") else None
            out.append((point.input.item, chars))
    return out


def test_cache_control_marks_system_blocks_tools_and_message_blocks() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "system": [
            {"type": "text", "text": "You are"},
            {"type": "text", "text": "Claude", "cache_control": {**MARK, "ttl": "1h"}},
        ],
        "tools": [
            {"name": "a", "input_schema": {}},
            {"name": "b", "input_schema": {}, "cache_control": MARK},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi", "cache_control": MARK},
                    {"type": "text", "text": " there"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "x"},
                    {
                        "type": "tool_use",
                        "id": "1",
                        "name": "a",
                        "input": {},
                        "cache_control": MARK,
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "1",
                        "content": "r",
                        "cache_control": MARK,
                    }
                ],
            },
        ],
    }
    params = messages_from_json(body)
    # input: the system message, "hi there", "x", the call, its result.
    assert len(params.input) == 5
    assert _points(params) == [
        (0, len("You are\n\nClaude")),
        (1, 2),
        (3, None),
        (4, None),
        ("tool", "b"),
    ]
    # A top-level cache_control marks the last item.
    automatic = messages_from_json({**body, "tools": [], "cache_control": MARK})
    assert _points(automatic)[-1] == (4, None)
    unmarked = {**body, "system": "s", "tools": [], "messages": [{"role": "user", "content": "q"}]}
    assert _points(messages_from_json(unmarked)) == []


def test_prompt_cache_breakpoints_on_responses_and_chat_parts() -> None:
    content = [
        {"type": "input_text", "text": "abc"},
        {"type": "input_text", "text": "de", "prompt_cache_breakpoint": EXPLICIT},
        {"type": "input_text", "text": "f"},
    ]
    params = params_from_json(
        {
            "model": "m",
            "input": [{"role": "user", "content": "x"}, {"role": "user", "content": content}],
        }
    )
    assert _points(params) == [(1, 5)]
    system = {"type": "text", "text": "s", "prompt_cache_breakpoint": EXPLICIT}
    output = {"type": "text", "text": "out", "prompt_cache_breakpoint": {**EXPLICIT, "ttl": "12h"}}
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    chat = chat_from_json(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": [system]},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": [output]},
            ],
        }
    )
    assert _points(chat.params) == [(0, 1), (2, None)]
    with pytest.raises(OpenAIError):
        params_from_json(
            {
                "model": "m",
                "input": [
                    {
                        "role": "user",
                        "content": [{**content[1], "prompt_cache_breakpoint": {"mode": "x"}}],
                    }
                ],
            }
        )


def test_positions_end_where_the_marked_block_ends(model_path: Path) -> None:
    """On the bundled model's template: a breakpoint within a user message ends right after its
    marked text (the tokens the prompt shares with that text alone); one after the system
    message where its turn ends; more than four keep the deepest four."""
    tokenizer = load_model(model_path).tokenizer
    marked = "The logbook: we left at dawn and sailed north along the cliffs."
    body = {
        "model": "m",
        "max_tokens": 5,
        "system": [{"type": "text", "text": "You keep a lighthouse.", "cache_control": MARK}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": marked, "cache_control": MARK},
                    {"type": "text", "text": " Where did we go?"},
                ],
            }
        ],
    }
    params = messages_from_json(body)
    items = list(params.input)
    prompt = render_prompt(tokenizer, items_to_messages(None, items), None, {}, None)
    marks = resolve_marks(params.cache_breakpoints, params.input, items)

    def positions(chosen: Any) -> tuple[int, ...]:
        return breakpoint_positions(
            tokenizer,
            prompt.tokens,
            chosen,
            instructions=None,
            items=items,
            tools=[],
            tool_parameters={},
            template_kwargs={},
        )

    system_end, after_marked = positions(marks)
    text = tokenizer.decode(prompt.tokens[:after_marked])
    assert text.endswith(marked) and text.count("<|im_start|>") == 2
    assert tokenizer.decode(prompt.tokens[:system_end]).endswith("<|im_start|>user\n")
    # Marks of items a context does not hold (a compaction dropped them) are left out.
    held = resolve_marks(params.cache_breakpoints, params.input, items[1:])
    assert [(m.item, m.chars) for m in held] == [(0, len(marked))]
    # Each a prefix of the marked text: six marks, the deepest four kept.
    many = [pb.CacheBreakpoint(input=pb.InputPoint(item=1, chars=n)) for n in range(10, 70, 10)]
    kept = positions(resolve_marks(many, params.input, items))
    assert len(kept) == MAX_BREAKPOINTS and kept[-1] <= after_marked


def test_hints_checked_wherever_a_schema_declares_them() -> None:
    """Found by schemathesis: an assistant message with nothing to render and a marked part
    (no item: no breakpoint, not a 500); a malformed breakpoint on a conversation item (the
    same part decoder refuses it); a tool_result's own text block marked (the result is)."""
    empty = {
        "role": "assistant",
        "content": [{"type": "text", "text": "", "prompt_cache_breakpoint": EXPLICIT}],
        "tool_calls": [],
    }
    assert _points(chat_from_json({"model": "m", "messages": [empty]}).params) == []
    bad = {
        "role": "user",
        "content": [{"type": "input_text", "text": "", "prompt_cache_breakpoint": {}}],
    }
    with pytest.raises(OpenAIError):
        item_from_json(bad, "items[0]")
    inner = {"type": "text", "text": "r", "cache_control": MARK}
    result = {"type": "tool_result", "tool_use_id": "1", "content": [inner]}
    call = {"type": "tool_use", "id": "1", "name": "a", "input": {}}
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ],
    }
    assert _points(messages_from_json(body)) == [(2, None)]
    inner["cache_control"] = {"type": "persistent"}
    with pytest.raises(OpenAIError, match=r"content\[0\]\.content\[0\]\.cache_control"):
        messages_from_json(body)
