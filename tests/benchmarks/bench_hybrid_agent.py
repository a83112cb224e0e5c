"""Prefill per turn of a 10-turn agent conversation on a hybrid (Qwen3.5-shaped) model.

An agent's conversation: a system prompt of at least 8k tokens (instructions and tools), a
task, then turns that send the model's call and the tool's output back (a user message every
third turn), thinking on (the generation prompt ends `<think>\\n`, as Qwen3.5's), the reply
sent back as text without its reasoning, as agents do. The same conversation, over Chat
Completions, on:

- ours on a Qwen3.5-shaped random model (gated delta layers beside one attention layer in four:
  its recurrent state cannot be trimmed, so only checkpoints of the whole cache serve);
- ours on a plain KV model of the same size (qwen3: every entry can be cut back);
- `mlx_lm.server` on each of the two (its checkpoints: the system prompt's end, the user
  segment's end before the thinking tail, the finished turn);
- the same Qwen3.5 as a VLM folder (mlx-vlm's `qwen3_5`, random weights of the same shape with a
  vision tower: mlx-vlm loads no text-only Qwen3.5 folder, its config wants M-RoPE), served by
  ours, `mlx_lm.server` (it drops the vision weights) and `mlx_vlm.server`, both as it ships (no
  prompt cache) and with its opt-in prompt cache (`APC_ENABLED=1`: exact-prefix snapshots for a
  hybrid cache; the disk tier off, as ours).

Prints, per turn, the prompt tokens and the tokens each server prefilled (prompt less the
`cached_tokens` it reports), then the totals and the wall time of each conversation. Not a test.

    flock /tmp/bench.lock .venv/bin/python tests/benchmarks/bench_hybrid_agent.py \\
        [--system-tokens 8000] [--turns 10] [--no-mlx-lm] [--no-vlm]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "benchmarks"))

from bench_serving import free_port, server_process, wait_mlx_lm  # noqa: E402

from tests.support.random_qwen3_5_vl import build_random_qwen3_5_vl  # noqa: E402
from tests.support.stack import Stack  # noqa: E402
from tests.support.zoo import TOKENIZER_FILES  # noqa: E402

HIDDEN, LAYERS = 128, 4
THINKING = {"enable_thinking": True}
WORDS = [
    "read",
    "the",
    "file,",
    "run",
    "the",
    "tests,",
    "search",
    "the",
    "code",
    "for",
    "the",
    "function,",
    "edit",
    "the",
    "module,",
    "keep",
    "the",
    "style,",
    "explain",
    "the",
    "change,",
    "never",
    "touch",
    "the",
    "lock",
    "file,",
    "ask",
    "before",
    "deleting,",
    "use",
    "the",
    "tools,",
    "report",
    "the",
    "result",
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} in the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "run_tests", "search", "edit_file")
]


def build(kind: str, out: Path) -> Path:
    """A random model of `kind` ("qwen3_5" or "qwen3"), hidden 128, 4 layers, the bundled
    tokenizer."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import _get_classes
    from mlx_responses.service.config import BUNDLED_MODEL

    vocab = json.loads((BUNDLED_MODEL / "config.json").read_text())["vocab_size"]
    text = {
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "intermediate_size": 2 * HIDDEN,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "max_position_embeddings": 65536,
        "tie_word_embeddings": False,
    }
    config: dict[str, Any]
    if kind == "qwen3_5":
        text |= {
            "model_type": "qwen3_5",
            "linear_num_value_heads": 4,
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 32,
            "linear_value_head_dim": 32,
            "linear_conv_kernel_dim": 4,
            "full_attention_interval": 4,  # Qwen3.5's: three gated delta layers, then attention
            "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        }
        config = {"model_type": "qwen3_5", "text_config": text}
    else:
        config = {"model_type": "qwen3", "rope_theta": 10000.0, **text}
    config["eos_token_id"] = json.loads((BUNDLED_MODEL / "config.json").read_text())["eos_token_id"]
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (BUNDLED_MODEL / name).exists():
            shutil.copy(BUNDLED_MODEL / name, out / name)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    mx.random.seed(0)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out


def system_prompt(words: int) -> str:
    return "You are a coding agent. " + " ".join(
        WORDS[(i * 7 + i // 5) % len(WORDS)] for i in range(words)
    )


def converse(
    url: str, model: str, system: str, turns: int, extra: dict[str, Any] | None = None
) -> tuple[list[tuple[int, int]], float]:
    """The conversation over Chat Completions at `url`: each turn's (prompt tokens, cached
    tokens), and the seconds it took. `extra`: fields added to each request's body."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Fix the failing test in the parser module."},
    ]
    out = []
    started = time.perf_counter()
    for turn in range(turns):
        body = {
            "model": model,
            "messages": messages,
            "tools": TOOLS,
            "max_tokens": 24,
            "temperature": 0.0,
            "chat_template_kwargs": THINKING,
            **(extra or {}),
        }
        reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600)
        if reply.status_code != 200:
            raise RuntimeError(f"{url} turn {turn + 1}: {reply.status_code} {reply.text[:500]}")
        data = reply.json()
        usage = data["usage"]
        details = usage.get("prompt_tokens_details") or {}
        out.append((int(usage["prompt_tokens"]), int(details.get("cached_tokens") or 0)))
        text = data["choices"][0]["message"].get("content") or ""  # reasoning dropped
        if turn % 3 == 2:
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"Good. Now step {turn + 1}: check the next module."},
            ]
        else:
            name = TOOLS[turn % len(TOOLS)]["function"]["name"]
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps({"path": f"src/m{turn}.py"})},
            }
            messages += [
                {"role": "assistant", "content": text, "tool_calls": [call]},
                {
                    "role": "tool",
                    "tool_call_id": f"call_{turn}",
                    "content": f"{name}: ok, 3 lines changed in src/m{turn}.py",
                },
            ]
    return out, time.perf_counter() - started


def ours(path: Path, system: str, turns: int) -> tuple[list[tuple[int, int]], float]:
    with Stack.running(model_path=path, store_url="memory", no_prompt_cache_disk=True) as stack:
        return converse(stack.base_url, path.name, system, turns)


def mlx_lm(path: Path, system: str, turns: int) -> tuple[list[tuple[int, int]], float]:
    port = free_port()
    argv = [sys.executable, "-m", "mlx_lm.server", "--model", str(path), "--port", str(port)]
    with server_process(f"mlx_lm-{path.name}", argv, dict(os.environ)) as proc:
        wait_mlx_lm(proc, port, 300)
        return converse(f"http://127.0.0.1:{port}", str(path), system, turns)


def wait_mlx_vlm(proc: subprocess.Popen[bytes], name: str, port: int, timeout: float) -> None:
    """Until `/health` names the loaded model."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode} (.bench/logs/{name}.log)")
        with contextlib.suppress(httpx.HTTPError):
            health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=30)
            if health.status_code == 200 and health.json().get("loaded_model"):
                return
        time.sleep(0.5)
    raise RuntimeError(f"{name} never answered")


def mlx_vlm(path: Path, system: str, turns: int, apc: bool) -> tuple[list[tuple[int, int]], float]:
    """`mlx_vlm.server` on a VLM folder; `apc`: its opt-in prompt cache, in memory only."""
    port = free_port()
    argv = [sys.executable, "-m", "mlx_vlm.server", "--model", str(path)]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    env = dict(os.environ) | {"APC_ENABLED": "1" if apc else "0", "APC_DISK_ENABLED": "0"}
    name = f"mlx_vlm-{path.name}{'-apc' if apc else ''}"
    with server_process(name, argv, env) as proc:
        wait_mlx_vlm(proc, name, port, 300)
        # mlx-vlm reads thinking from its own field, not from chat_template_kwargs.
        return converse(f"http://127.0.0.1:{port}", str(path), system, turns, THINKING)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system-tokens", type=int, default=8000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--no-mlx-lm", action="store_true", help="no mlx_lm.server")
    parser.add_argument("--no-vlm", action="store_true", help="no Qwen3.5 VLM folder")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-hybrid-"))
    hybrid, plain = build("qwen3_5", root / "qwen3_5"), build("qwen3", root / "qwen3")
    vlm = build_random_qwen3_5_vl(
        root / "qwen3_5_vl",
        hidden_size=HIDDEN,
        layers=LAYERS,
        full_attention_interval=4,
        context=65536,
    )
    from mlx_responses.service.engine.model import load_model

    tokenizer = load_model(hybrid).tokenizer
    words = args.system_tokens // 3
    while len(tokenizer.encode(system_prompt(words))) < args.system_tokens:
        words += 50
    system = system_prompt(words)
    runs: dict[str, tuple[list[tuple[int, int]], float]] = {
        "ours qwen3.5": ours(hybrid, system, args.turns),
        "ours plain KV": ours(plain, system, args.turns),
    }
    if not args.no_mlx_lm:
        runs["mlx_lm.server qwen3.5"] = mlx_lm(hybrid, system, args.turns)
        runs["mlx_lm.server plain KV"] = mlx_lm(plain, system, args.turns)
    if not args.no_vlm:
        runs["ours qwen3.5 VL"] = ours(vlm, system, args.turns)
        if not args.no_mlx_lm:
            runs["mlx_lm.server qwen3.5 VL"] = mlx_lm(vlm, system, args.turns)
        runs["mlx_vlm.server qwen3.5 VL"] = mlx_vlm(vlm, system, args.turns, apc=False)
        runs["mlx_vlm.server APC qwen3.5 VL"] = mlx_vlm(vlm, system, args.turns, apc=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    print(f"hybrid agent conversation: hidden {HIDDEN}, {LAYERS} layers, {args.turns} turns")
    print(f"system prompt {len(tokenizer.encode(system))} tokens; load: {load.strip()}")
    # NOTE: transformers picks the tokenizer class by model_type, so the two models may count
    # the same text in different tokens: each column has its own prompt.
    names = list(runs)
    print("turn  " + "  ".join(f"{n:>30}" for n in names))
    print("      " + "  ".join(f"{'prompt / prefilled':>30}" for _ in names))
    for turn in range(args.turns):
        cells = [runs[n][0][turn] for n in names]
        print(f"{turn + 1:>4}  " + "  ".join(f"{p:>17} / {p - c:>10}" for p, c in cells))
    totals = {n: (sum(p for p, _ in runs[n][0]), sum(p - c for p, c in runs[n][0])) for n in names}
    print(" all  " + "  ".join(f"{t[0]:>17} / {t[1]:>10}" for t in totals.values()))
    print(" s    " + "  ".join(f"{runs[n][1]:>30.1f}" for n in names))
    for n in names:
        prompt, prefilled = totals[n]
        print(f"{n}: prefilled {prefilled} of {prompt} prompt tokens ({prefilled / prompt:.1%})")
    base = totals[names[0]][1]
    for n in names[1:]:
        print(f"prefilled, {n} / {names[0]}: {totals[n][1] / max(1, base):.2f}x")


if __name__ == "__main__":
    main()
