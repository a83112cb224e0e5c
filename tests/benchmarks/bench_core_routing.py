"""Routing by cache across cores: the share of prompt tokens read from the prompt cache.

Agent traffic as Codex sends it (store off, the whole history every turn): N conversations of
T turns under one shared system prompt of about S tokens (instructions), each conversation's
turns one after another, the conversations at once. Three set-ups in one run, each on fresh
processes: one core behind a façade, two cores behind one façade routed round robin, and the
same two routed by cache (--core-routing cache, the default). Prints, per set-up, the prompt
tokens, those read from cache, their share, the wall time, and the ratios to one core. Not a
test.

    .venv/bin/python tests/benchmarks/bench_core_routing.py [--conversations 16] [--turns 4]
        [--system-tokens 8000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.processes import Process, free_port, wait_status

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "service/assets/tiny-chat"
TEXT = (
    "You are the release assistant of the harbour town's software team: fishermen mended nets, "
    "the baker lit his ovens, and the children counted the boats coming home with the tide. "
)


@contextmanager
def _stack(cores: int, routing: str) -> Iterator[str]:
    with ExitStack() as stack:
        grpc_ports = [free_port() for _ in range(cores)]
        procs = []
        for port in grpc_ports:
            core = Process("--log-level", "WARNING", "core", "--model", str(MODEL),
                           "--grpc-port", str(port))  # fmt: skip
            stack.callback(core.stop)
            procs.append(core)
        http = free_port()
        args = ["--log-level", "WARNING", "facade", "--port", str(http)]
        for port in grpc_ports:
            args += ["--core", f"127.0.0.1:{port}"]
        facade = Process(*args, "--core-routing", routing)
        stack.callback(facade.stop)
        wait_status(http, 200, facade, timeout=180)
        yield f"http://127.0.0.1:{http}"


async def _conversation(
    client: httpx.AsyncClient, base: str, system: str, index: int, turns: int
) -> tuple[int, int]:
    history: list[dict[str, Any]] = []
    prompt = cached = 0
    for turn in range(turns):
        history.append({"role": "user", "content": f"Session {index}, step {turn}: status?"})
        body = {"model": "tiny-chat", "instructions": system, "input": history, "store": False,
                "max_output_tokens": 8, "temperature": 0}  # fmt: skip
        answer = await client.post(f"{base}/v1/responses", json=body)
        answer.raise_for_status()
        data = answer.json()
        prompt += data["usage"]["input_tokens"]
        cached += data["usage"]["input_tokens_details"]["cached_tokens"]
        text = "".join(
            part.get("text", "")
            for item in data["output"]
            if item["type"] == "message"
            for part in item["content"]
        )
        history.append({"role": "assistant", "content": text or "ok"})
    return prompt, cached


async def _traffic(base: str, system: str, conversations: int, turns: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=900) as client:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(_conversation(client, base, system, i, turns) for i in range(conversations))
        )
        wall = time.perf_counter() - started
    prompt = sum(p for p, _ in results)
    cached = sum(c for _, c in results)
    return {"prompt": prompt, "cached": cached, "share": cached / prompt, "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--system-tokens", type=int, default=8000)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    per_text = len(AutoTokenizer.from_pretrained(str(MODEL)).encode(TEXT))
    system = TEXT * max(1, args.system_tokens // per_text)
    print(f"system prompt: {len(system) // len(TEXT) * per_text:,} tokens", flush=True)
    rows = {}
    for name, cores, routing in [
        ("one core", 1, "cache"),
        ("two cores, round robin", 2, "round_robin"),
        ("two cores, by cache", 2, "cache"),
    ]:
        with _stack(cores, routing) as base:
            rows[name] = asyncio.run(_traffic(base, system, args.conversations, args.turns))
        r = rows[name]
        print(f"{name:24s} prompt {r['prompt']:>9,.0f}  cached {r['cached']:>9,.0f}  "
              f"share {r['share']:.3f}  wall {r['wall']:6.1f} s", flush=True)  # fmt: skip
    one = rows["one core"]["share"]
    for name in ("two cores, round robin", "two cores, by cache"):
        print(f"{name}: cached share / one core's = {rows[name]['share'] / one:.3f}")


if __name__ == "__main__":
    main()
