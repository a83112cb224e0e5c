"""Scores the model on Codex's apply_patch turn, replayed against a real server.

Codex 0.169's own first request (tests/fixtures/codex_0.169_request.json: its base instructions,
skills, tools and context, ~20k tokens; its freeform apply_patch tool added) is sent with a
sandboxed environment context for a work dir and a user request quoting a patch; then the second
request, with the call and Codex's result, which the model should answer with `Done.`. The
server does what it does for Codex: the custom tool's Lark grammar, the sliding window the model
declares, `--hosted-tools drop`. Work dirs alternate between pytest's (long, full of digits) and
short ones; each patch adds a file of one word. Prints each case and the two rates.

    python -m training.tiny_chat.codex_replay MODEL -n 10
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import free_port, process, wait_status
from training.tiny_chat import agent

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests/fixtures/codex_0.169_request.json"
APPLY_PATCH = ROOT / "tests/fixtures/codex_0.169_apply_patch_tool.json"
# Training never writes a patch of these (agent.replay_case).
WORDS = agent.REPLAY_WORDS
EXTENSIONS = agent.REPLAY_EXTENSIONS
# The training's first quoted-patch request and Codex's result for a freeform apply_patch.
REQUEST = agent.PATCH_GIVEN[0]
RESULT = agent.PATCH_RESULTS[1]


def turns(model: str, cwd: str, name: str, content: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Codex's two requests: the one asking for the patch, and the one carrying its result."""
    body = copy.deepcopy(json.loads(FIXTURE.read_text())["body"])
    body.update(model=model, stream=False)
    # apply_patch as Codex sends it when its catalog says freeform, after its first three tools
    body["tools"].insert(3, json.loads(APPLY_PATCH.read_text())["tool"])
    context, request = body["input"][-2], body["input"][-1]
    assert context["content"][0]["text"].startswith("<environment_context>")
    # The workspace-write sandbox's context, as Codex sends it for `cwd`.
    sandboxed = agent.codex_context(cwd, "bash", "2026-12-04", "Etc/UTC", agent.CODEX_HIDDEN_PATHS)
    context["content"][0]["text"] = sandboxed
    patch = agent.patch_input(name, content)
    request["content"][0]["text"] = REQUEST.format(p=patch.rstrip("\n"))
    second = copy.deepcopy(body)
    call_id = "call_replay"
    second["input"] += [
        {
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": agent.APPLY_PATCH,
            "input": patch,
        },
        {"type": "custom_tool_call_output", "call_id": call_id, "output": RESULT.format(f=name)},
    ]
    return body, second


@contextlib.contextmanager
def server(model: Path) -> Iterator[str]:
    """`mlx-responses serve` on `model` as for Codex (hosted tools dropped); its base URL."""
    port = free_port()
    args = ["serve", "--model", str(model), "--port", str(port), "--grpc-port", str(free_port())]
    with process(*args, "--hosted-tools", "drop") as proc:
        wait_status(port, 200, proc, timeout=120)
        yield f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", type=Path, nargs="?", default=ROOT / "service/assets/tiny-chat")
    parser.add_argument("-n", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    calls = answers = 0
    with server(args.model) as base:
        for i in range(args.n):
            name = f"{rng.choice(WORDS)}.{rng.choice(EXTENSIONS)}"
            content = rng.choice(WORDS)
            test = "test_codex_applies_the_patch_t0"
            pytest_dir = f"/tmp/pytest-of-root/pytest-{rng.randint(0, 999)}/{test}/work"
            cwd = pytest_dir if i % 2 == 0 else f"/tmp/{rng.choice(('work', 'repo', 'w'))}"
            first, second = turns(args.model.name, cwd, name, content)
            out = httpx.post(f"{base}/v1/responses", json=first, timeout=600).json()["output"]
            call = next((o["input"] for o in out if o["type"] == "custom_tool_call"), None)
            want = second["input"][-2]["input"]
            out = httpx.post(f"{base}/v1/responses", json=second, timeout=600).json()["output"]
            said = "".join(
                c.get("text", "") for o in out if o["type"] == "message" for c in o["content"]
            )
            done = said == "Done." and all(o["type"] == "message" for o in out)
            calls += call == want
            answers += done
            print(f"{cwd[:40]:40} call {'ok ' if call == want else 'BAD'} {call!r:.70}", end="")
            print(f" | done {'ok ' if done else 'BAD'} {said!r:.20}", flush=True)
    print(f"apply_patch turn: call {calls}/{args.n}, done {answers}/{args.n}")


if __name__ == "__main__":
    main()
