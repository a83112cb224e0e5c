"""Decodes the same bodies with this tree's façade and git revision REV's, and lists every body
they answer differently (the proto bytes, or the error's status, message, param and code).

The bodies: each dialect's valid fuzz body (tests/support/fuzz_bodies.py), with every kind of
item, tool and format added (RICH), and N random mutations of it. REV's façade runs from an
export laid out as installed, beside this tree's generated `mlx_responses/v1` (as
bench_facade_cpu.py does). For a refactoring of the decoders that must change nothing
observable:

    python tools/decoder_diff.py main --mutations 1500
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
CALL = {"call_id": "c", "name": "f"}
# What each dialect's fuzz body lacks, added to it (lists extended, objects set).
RICH: dict[str, dict[str, Any]] = {
    "responses": {
        "input": [
            {"type": "custom_tool_call", **CALL, "input": "a", "namespace": "n"},
            {"type": "custom_tool_call_output", "call_id": "c", "output": [{"text": "o"}]},
            {"type": "reasoning", "summary": [{"text": "s"}], "encrypted_content": "e"},
            {"type": "compaction", "encrypted_content": "z", "status": "completed"},
            {"role": "assistant", "id": "m", "content": [{"type": "output_text", "text": "t"}]},
            {"type": "shell_call", "call_id": "s", "action": {"commands": ["ls"], "timeout_ms": 5}},
            {"type": "shell_call_output", "call_id": "s", "output": [{"stdout": "a"}]},
            {"type": "local_shell_call", "call_id": "l", "action": {"command": ["ls"], "env": {}}},
            {"type": "local_shell_call_output", "id": "l", "output": "x"},
            {
                "type": "apply_patch_call",
                "call_id": "p",
                "operation": {"type": "delete_file", "path": "a"},
            },
            {"type": "apply_patch_call_output", "call_id": "p", "status": "failed"},
            {"type": "item_reference", "id": "x"},
        ],
        "tools": [
            {
                "type": "custom",
                "name": "c",
                "format": {"type": "grammar", "syntax": "lark", "definition": "s"},
            },
            {"type": "namespace", "name": "n", "tools": [{"type": "function", "name": "g"}]},
            {"type": "function", "function": {"name": "h", "parameters": SCHEMA, "strict": True}},
            {"type": "shell"},
            {"type": "web_search"},
        ],
        "text": {
            "format": {"type": "json_schema", "name": "n", "schema": SCHEMA},
            "verbosity": "low",
        },
        "reasoning": {"effort": "low", "summary": "auto"},
        "context_management": [{"type": "compaction", "compact_threshold": 100}],
        "include": ["reasoning.encrypted_content"],
        "conversation": {"id": "conv"},
        "tool_choice": {"type": "allowed_tools", "tools": [{"type": "function", "name": "g"}]},
    },
    "chat": {
        "messages": [
            {
                "role": "assistant",
                "reasoning_content": "r",
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": {"a": 1}},
                    }
                ],
            }
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA}},
    },
    "messages": {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}},
                    {"type": "thinking", "thinking": "x"},
                ],
            }
        ],
        "tools": [
            {"name": "f", "input_schema": SCHEMA},
            {"type": "web_search_20250305", "name": "w"},
        ],
    },
}


def _bodies(mutations: int) -> list[tuple[str, Any]]:
    from tests.support import fuzz_bodies as fb

    warnings.filterwarnings("ignore")  # hypothesis: .example() outside a test
    bases = {
        "responses": fb.responses_body("m"),
        "chat": fb.chat_body("m"),
        "messages": fb.messages_body("m"),
        "completions": fb.completion_body("m"),
    }
    for name, extra in RICH.items():
        for key, value in extra.items():
            given = bases[name].get(key)
            bases[name][key] = [*given, *value] if isinstance(given, list) else value
    out: list[tuple[str, Any]] = []
    for name, base in bases.items():
        out.append((name, base))
        strategy = fb.mutated(base, big=False)
        out += [(name, strategy.example()) for _ in range(mutations)]
    return out


def _decode(bodies: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
    """Each body's answer in the tree this interpreter imports."""
    from mlx_responses.http_facade.anthropic.to_proto import messages_from_json
    from mlx_responses.http_facade.chat.to_proto import chat_from_json
    from mlx_responses.http_facade.completions.to_proto import completion_from_json
    from mlx_responses.http_facade.kit.errors import OpenAIError
    from mlx_responses.http_facade.responses.to_proto import params_from_json

    decoders = {
        "responses": params_from_json,
        "chat": lambda b: chat_from_json(b).params,
        "messages": messages_from_json,
        "completions": completion_from_json,  # its prompts' params, and options
    }
    answers: list[tuple[Any, ...]] = []
    for name, body in bodies:
        try:
            got = decoders[name](body)
            serialize = getattr(got, "SerializeToString", None)
            answers.append(("ok", serialize(deterministic=True) if serialize else repr(got)))
        except OpenAIError as error:
            answers.append(("error", error.status, str(error), error.param, error.code))
        except Exception as exc:  # a crash is an answer to compare too
            answers.append(("crash", type(exc).__name__, str(exc)[:200]))
    return answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the git revision to compare with")
    parser.add_argument("--mutations", type=int, default=500, help="random bodies per dialect")
    parser.add_argument("--decode", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.decode:  # the child: decode the pickled bodies in the tree it imports
        path = Path(args.decode)
        path.with_suffix(".out").write_bytes(pickle.dumps(_decode(pickle.loads(path.read_bytes()))))
        return 0
    sys.path.insert(0, str(ROOT))
    from tools.rev_tree import export, importing

    bodies = _bodies(args.mutations)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "bodies.pkl"
        data.write_bytes(pickle.dumps(bodies))
        answers = []
        for tree in (export(args.rev, Path(tmp) / "rev"), ROOT):
            command = [sys.executable, str(Path(__file__).resolve()), args.rev, f"--decode={data}"]
            subprocess.run(command, env=importing(tree), cwd=tree, check=True)
            answers.append(pickle.loads(data.with_suffix(".out").read_bytes()))
    differ = [i for i, (a, b) in enumerate(zip(*answers, strict=True)) if a != b]
    for i in differ[:20]:
        print(
            f"{bodies[i][0]}: {args.rev} {answers[0][i][:5]!r}\n  this tree {answers[1][i][:5]!r}"
        )
    print(f"{len(differ)} of {len(bodies)} bodies answered differently")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
