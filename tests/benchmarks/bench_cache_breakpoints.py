"""What finding a client's cache breakpoints costs on a request shaped like Claude Code's.

Claude Code sends a long system prompt (two blocks, the last marked `cache_control`), some
twenty tools (the last marked) and a conversation of tool calls and results, its last two user
turns marked: about 44k tokens on the bundled model's tokenizer. Times rendering the prompt as
the core does (template, tokens, the system turn's end), then the four breakpoints' positions
(service/text/cache_breakpoints.py: the template rendered up to each marked block), for a
first turn, next turns (one more tool round trip each: the messages' marks move on, the system
prompt's and the tools' stay) and the last one again (medians of 3). Not a test.

    .venv/bin/python tests/benchmarks/bench_cache_breakpoints.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_responses.http_facade.anthropic.to_proto import messages_from_json
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.text.cache_breakpoints import (
    breakpoint_positions,
    resolve_marks,
)
from mlx_responses.service.text.prompt import (
    items_to_messages,
    render_prompt,
    system_turn_end,
    tools_to_template,
)

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "service/assets/tiny-chat"
MARK: Any = {"type": "ephemeral"}
PROSE = (
    "When you edit a file, read it first, keep its style, and run the tests that cover the "
    "change; report what you changed and why, and never leave the tree in a broken state. "
)


def claude_code_body(turns: int = 20) -> dict[str, Any]:
    """A Messages body of Claude Code's shape (system, tools, tool-call turns), ~44k tokens."""
    tools = [
        {
            "name": f"tool_{k}",
            "description": PROSE * 6,
            "input_schema": {
                "type": "object",
                "properties": {
                    f"arg_{j}": {"type": "string", "description": PROSE} for j in range(6)
                },
                "required": ["arg_0"],
            },
        }
        for k in range(20)
    ]
    tools[-1]["cache_control"] = MARK
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for t in range(turns):
        call = {"type": "tool_use", "id": f"c{t}", "name": "tool_1", "input": {"arg_0": "x"}}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "Ok."}, call]})
        result = {"type": "tool_result", "tool_use_id": f"c{t}", "content": PROSE * 12}
        messages.append({"role": "user", "content": [result]})
    for message in (messages[-1], messages[-3]):
        message["content"][-1]["cache_control"] = MARK
    return {
        "model": "m",
        "max_tokens": 1,
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's CLI."},
            {"type": "text", "text": PROSE * 60, "cache_control": MARK},
        ],
        "tools": tools,
        "messages": messages,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tokenizer = load_model(MODEL).tokenizer
    for turns in range(20, 20 + args.repeats):
        # Each turn one more tool call: the marks move to the last two user turns.
        params = messages_from_json(claude_code_body(turns))
        items = list(params.input)
        parameters = {t.function.name: json.loads(t.function.parameters_json) for t in params.tools}
        marks = resolve_marks(params.cache_breakpoints, params.input, items)
        _measure(tokenizer, params, items, parameters, marks, what="turn")
    _measure(tokenizer, params, items, parameters, marks, what="repeat", rounds=3)


def _measure(
    tokenizer: Any,
    params: Any,
    items: Any,
    parameters: Any,
    marks: Any,
    *,
    what: str,
    rounds: int = 1,
) -> None:
    tools = tools_to_template(params.tools, parameters)
    prompts, finds = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        messages = items_to_messages(None, items)
        prompt = render_prompt(tokenizer, messages, tools, {}, None)
        end = system_turn_end(tokenizer, messages, tools, {}, prompt.tokens)
        rendered = time.perf_counter()
        positions = breakpoint_positions(
            tokenizer,
            prompt.tokens,
            marks,
            instructions=None,
            items=items,
            tools=params.tools,
            tool_parameters=parameters,
            template_kwargs={},
        )
        prompts.append(rendered - start)
        finds.append(time.perf_counter() - rendered)
    print(
        f"{what}: {len(prompt.tokens)} tokens, system turn ends at {end}; breakpoints "
        f"({len(marks)}) {positions}; render + system turn "
        f"{statistics.median(prompts) * 1e3:.1f} ms, breakpoints "
        f"{statistics.median(finds) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
