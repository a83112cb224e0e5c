"""The façade's CPU per request: each dialect's typical body decoded and its answer encoded.

In process, no server, no core: for Responses, Chat Completions, legacy Completions,
Anthropic Messages and Embeddings, the time a typical request takes to go from its JSON bytes
to the core's proto (`parse_body` and the dialect's decoder) and the time its whole answer
takes from the core's proto to JSON bytes (the dialect's encoder and `json.dumps`, as
`web.json_response` writes it). CPU time (`time.process_time`), the minimum over the repeats.

`--baseline REV` measures the façade of git revision REV in the same run (its `http_facade/`
and `service/` exported beside this tree's generated `mlx_responses/v1`): the two trees take
turns in fresh interpreters, and the ratios (this tree / REV) are printed at the end.

    flock /tmp/bench.lock python tests/benchmarks/bench_facade_cpu.py --baseline main
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tools.rev_tree import export, importing  # noqa: E402

FACADE = "mlx_responses.http_facade"
# Where each codec lives: the dialect folders, then (before they were siblings) the top level.
CODECS = {
    "responses": ("responses.to_proto", "to_proto"),
    "responses_out": ("responses.from_proto", "from_proto"),
    "json_body": ("kit.json_body", "json_body"),
}


def _module(key: str) -> Any:
    for name in CODECS.get(key, (key,)):
        try:
            return importlib.import_module(f"{FACADE}.{name}")
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(key)


def _schema(*required: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            name: {"type": "string", "description": f"The {name}."} for name in required
        },
        "required": list(required),
    }


TOOLS = [
    ("get_weather", "Current weather for a city.", _schema("city", "unit")),
    ("search_docs", "Searches the documentation.", _schema("query")),
]
SYSTEM = "You are a helpful assistant. Answer briefly and call a tool when it helps."
QUESTION = "What is the weather in Paris today, and should I take an umbrella?"
ANSWER = "It is 14 degrees and raining in Paris. " * 8
ARGUMENTS = '{"city": "Paris", "unit": "celsius"}'
OUTPUT = '{"temperature": 14, "conditions": "rain", "humidity": 0.82}'


def responses_body() -> dict[str, Any]:
    return {
        "model": "mlx-community/Qwen3-0.6B-4bit",
        "instructions": SYSTEM,
        "input": [
            {"role": "user", "content": QUESTION},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": ARGUMENTS,
            },
            {"type": "function_call_output", "call_id": "call_1", "output": OUTPUT},
            {"role": "assistant", "content": [{"type": "output_text", "text": ANSWER}]},
            {"role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]},
        ],
        "tools": [
            {"type": "function", "name": n, "description": d, "parameters": p} for n, d, p in TOOLS
        ],
        "tool_choice": "auto",
        "temperature": 0.7,
        "top_p": 0.95,
        "max_output_tokens": 512,
        "text": {"format": {"type": "text"}},
        "reasoning": {"effort": "low"},
        "metadata": {"session": "bench"},
        "store": True,
    }


def chat_body() -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather"}}
    call["function"]["arguments"] = ARGUMENTS
    return {
        "model": "mlx-community/Qwen3-0.6B-4bit",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": OUTPUT},
            {"role": "assistant", "content": ANSWER},
            {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
        ],
        "tools": [
            {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
            for n, d, p in TOOLS
        ],
        "tool_choice": "auto",
        "temperature": 0.7,
        "top_p": 0.95,
        "max_tokens": 512,
        "stop": ["</answer>"],
        "seed": 7,
    }


def completions_body() -> dict[str, Any]:
    return {
        "model": "mlx-community/Qwen3-0.6B-4bit",
        "prompt": f"{SYSTEM}\n\nQ: {QUESTION}\nA:",
        "max_tokens": 128,
        "temperature": 0.7,
        "top_p": 0.95,
        "stop": ["\n\n", "Q:"],
        "seed": 7,
    }


def anthropic_body() -> dict[str, Any]:
    return {
        "model": "mlx-community/Qwen3-0.6B-4bit",
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": QUESTION},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": json.loads(ARGUMENTS),
                    },
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": OUTPUT}],
            },
            {"role": "assistant", "content": ANSWER},
            {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
        ],
        "tools": [{"name": n, "description": d, "input_schema": p} for n, d, p in TOOLS],
        "tool_choice": {"type": "auto"},
        "max_tokens": 1024,
        "temperature": 0.7,
        "thinking": {"type": "enabled", "budget_tokens": 256},
    }


def embeddings_body() -> dict[str, Any]:
    return {
        "model": "mlx-community/all-MiniLM-L6-v2-4bit",
        "input": [QUESTION, ANSWER, SYSTEM, "And tomorrow?"],
    }


def core_response() -> Any:
    """What the core answers a turn: reasoning, a message and a tool call, with usage."""
    from mlx_responses.v1 import responses_pb2 as pb

    return pb.Response(
        id="resp_0123456789abcdef0123456789abcdef",
        created_at=1_765_000_000,
        completed_at=1_765_000_002,
        status=pb.RESPONSE_STATUS_COMPLETED,
        model="mlx-community/Qwen3-0.6B-4bit",
        output=[
            pb.Item(
                reasoning=pb.ReasoningItem(
                    id="rs_1",
                    status=pb.ITEM_STATUS_COMPLETED,
                    content=[pb.ReasoningText(text="The user asks about tomorrow. " * 4)],
                )
            ),
            pb.Item(
                message=pb.MessageItem(
                    id="msg_1",
                    role=pb.ROLE_ASSISTANT,
                    status=pb.ITEM_STATUS_COMPLETED,
                    content=[pb.ContentPart(output_text=pb.OutputText(text=ANSWER))],
                )
            ),
            pb.Item(
                function_call=pb.FunctionCallItem(
                    id="fc_1",
                    call_id="call_2",
                    name="get_weather",
                    arguments=ARGUMENTS,
                    status=pb.ITEM_STATUS_COMPLETED,
                )
            ),
        ],
        usage=pb.Usage(input_tokens=412, output_tokens=96, reasoning_tokens=24),
        tool_choice=pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_AUTO),
        temperature=0.7,
        top_p=0.95,
        max_output_tokens=512,
        parallel_tool_calls=True,
        tools=[
            pb.Tool(function=pb.FunctionTool(name=n, description=d, parameters_json=json.dumps(p)))
            for n, d, p in TOOLS
        ],
    )


def embeddings_reply() -> Any:
    from mlx_responses.v1 import embeddings_service_pb2 as em

    vectors = [[(i * 7 + j) % 97 / 97.0 for j in range(384)] for i in range(4)]
    return em.CreateEmbeddingsResponse(
        model="mlx-community/all-MiniLM-L6-v2-4bit",
        data=[em.Embedding(index=i, values=v) for i, v in enumerate(vectors)],
        usage=em.EmbeddingsUsage(prompt_tokens=64, total_tokens=64),
    )


Work = tuple[bytes, Callable[[Any], Any], Callable[[], Any]]


def workloads() -> dict[str, Work]:
    """Per dialect: the request bytes, its decoder, and its encoder (from the core's answer)."""
    responses, responses_out = _module("responses"), _module("responses_out")
    chat, chat_out = _module("chat.to_proto"), _module("chat.from_proto")
    legacy, legacy_out = _module("completions.to_proto"), _module("completions.from_proto")
    anthropic, anthropic_out = _module("anthropic.to_proto"), _module("anthropic.from_proto")
    embed, embed_out = _module("embeddings.to_proto"), _module("embeddings.from_proto")
    answer, vectors = core_response(), embeddings_reply()
    prompt = completions_body()["prompt"]
    return {
        "responses": (
            json.dumps(responses_body()).encode(),
            responses.params_from_json,
            lambda: responses_out.response_to_json(answer),
        ),
        "chat": (
            json.dumps(chat_body()).encode(),
            chat.chat_from_json,
            lambda: chat_out.completion_json([answer], False),
        ),
        "completions": (
            json.dumps(completions_body()).encode(),
            legacy.completion_from_json,
            lambda: legacy_out.completion_json([answer], [prompt], 1, echo=False, logprobs=False),
        ),
        "anthropic": (
            json.dumps(anthropic_body()).encode(),
            anthropic.messages_from_json,
            lambda: anthropic_out.message_json(answer),
        ),
        "embeddings": (
            json.dumps(embeddings_body()).encode(),
            embed.embeddings_from_json,
            lambda: embed_out.embeddings_json(vectors, "float"),
        ),
    }


def _cpu_us(fn: Callable[[], Any], loops: int) -> float:
    start = time.process_time()
    for _ in range(loops):
        fn()
    return (time.process_time() - start) / loops * 1e6


def measure(loops: int, repeats: int) -> dict[str, dict[str, float]]:
    """Microseconds of CPU per request, decode and encode, the minimum over `repeats`."""
    parse = _module("json_body").parse_body
    figures: dict[str, dict[str, float]] = {}
    for name, (raw, decode, encode) in workloads().items():
        decode(parse(raw))  # warm: imports, caches
        decoding = lambda raw=raw, decode=decode: decode(parse(raw))  # noqa: E731
        encoding = lambda encode=encode: json.dumps(encode()).encode()  # noqa: E731
        figures[name] = {
            "decode": min(_cpu_us(decoding, loops) for _ in range(repeats)),
            "encode": min(_cpu_us(encoding, loops) for _ in range(repeats)),
        }
    return figures


def _run(loops: int, repeats: int, tree: Path | None) -> dict[str, dict[str, float]]:
    args = [sys.executable, __file__, "--json", f"--loops={loops}", f"--repeats={repeats}"]
    cwd = tree or REPO
    env = importing(tree)
    out = subprocess.run(args, env=env, cwd=cwd, check=True, capture_output=True, text=True)
    result = json.loads(out.stdout)
    print(f"measured {result.pop('tree')}")
    return result  # type: ignore[no-any-return]


def _merge(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {
        name: {part: min(r[name][part] for r in runs) for part in runs[0][name]} for name in runs[0]
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=300, help="requests per timing")
    parser.add_argument("--repeats", type=int, default=5, help="timings per figure; the minimum")
    parser.add_argument("--rounds", type=int, default=3, help="alternations with --baseline")
    parser.add_argument("--baseline", metavar="REV", help="also measure REV's façade")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json:
        figures: dict[str, Any] = measure(args.loops, args.repeats)
        figures["tree"] = importlib.import_module(FACADE).__path__[0]
        print(json.dumps(figures))
        return 0
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.baseline is None:
        mine = measure(args.loops, args.repeats)
        for name, parts in mine.items():
            print(f"{name:12} decode {parts['decode']:8.1f} us  encode {parts['encode']:8.1f} us")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = export(args.baseline, Path(tmp))
        base_runs, mine_runs = [], []
        for _ in range(args.rounds):
            base_runs.append(_run(args.loops, args.repeats, base_tree))
            mine_runs.append(_run(args.loops, args.repeats, None))
    base, mine = _merge(base_runs), _merge(mine_runs)
    print(
        f"CPU per request, us (min of {args.rounds}x{args.repeats}x{args.loops}); ratio = this/REV"
    )
    print(f"{'dialect':12} {'part':7} {args.baseline[:12]:>12} {'this tree':>12} {'ratio':>7}")
    for name in mine:
        for part in ("decode", "encode"):
            b, m = base[name][part], mine[name][part]
            print(f"{name:12} {part:7} {b:12.1f} {m:12.1f} {m / b:7.2f}")
        b, m = sum(base[name].values()), sum(mine[name].values())
        print(f"{name:12} {'total':7} {b:12.1f} {m:12.1f} {m / b:7.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
