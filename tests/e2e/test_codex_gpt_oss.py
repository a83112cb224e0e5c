"""The real Codex CLI (`codex exec`, 0.169), in its default configuration with only the provider
pointed at `serve --hosted-tools drop`, runs a shell command the trained tiny gpt-oss calls for.

Codex's default request for a model it has no metadata for is ~18.8k tokens of harmony prompt
(its base instructions, skills and permissions, twelve functions, an environment context): the
model (training/tiny_harmony/codex.py) writes its reasoning, then a call of Codex's shell tool
on the commentary channel (`to=functions.exec_command`, `{"cmd": ...}`); the server reads it as
a `function_call`, Codex runs the command in its sandbox and sends the output back with the
reasoning (`encrypted_content`, the harmony rule keeps it inside the tool loop), and the model
answers on the final channel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_codex import _events, _run_codex

pytestmark = [
    pytest.mark.e2e,  # and skipped where the Codex CLI is not installed (`make setup`)
    # The committed tiny gpt-oss takes Codex's prompt but answers it without a call. A
    # Codex-trained checkpoint passed this test's body (Codex ran its `echo music`, the turn
    # completed) but lost the weather call's city: training/tiny_harmony/NOTES.md.
    pytest.mark.skip(reason="no adopted tiny gpt-oss calls Codex's shell: tiny_harmony/NOTES.md"),
]

MODEL = Path(__file__).resolve().parents[2] / "service" / "assets" / "tiny-gpt-oss"


def test_codex_runs_the_shell_command_gpt_oss_calls(tmp_path: Path) -> None:
    done, server_log = _run_codex(
        MODEL, tmp_path, prompt="Run `echo hi`", trimmed=False, timeout=180
    )
    assert "incompatible payload" not in done.stdout + done.stderr
    events = _events(done)  # the turn completed
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    commands = [i for i in items if i["type"] == "command_execution"]
    # Codex ran the model's call in its shell: an `echo WORD`, exited 0, WORD in its output.
    # Which word is the model's own: behind Codex's ~18.4k tokens the tiny model does not copy
    # the one asked for (training/tiny_harmony/evaluate.py --codex scores it).
    assert len(commands) == 1, items
    (command,) = commands
    assert command["status"] == "completed" and command["exit_code"] == 0, command
    echoed = re.search(r"\becho (\w+)", command["command"])
    assert echoed, command
    printed = echoed.group(1)
    assert printed in command["aggregated_output"].splitlines(), command
    # Its output went back to the model: Codex's record of the turn holds the call's output (the
    # second request carries the history), and that request was read (two responses, below).
    outputs = [i for i in _rollout(tmp_path) if i.get("type") == "function_call_output"]
    assert len(outputs) == 1 and f"Output:\n{printed}\n" in outputs[0]["output"], outputs
    # Then the model answered after the output: the turn ends in Codex's agent message.
    assert items[-1]["type"] == "agent_message" and items[-1]["text"].strip(), items
    usage = next(e["usage"] for e in events if e["type"] == "turn.completed")
    assert usage["input_tokens"] > 30_000, usage  # two requests of Codex's whole default prompt
    assert "dropping hosted tool type 'web_search'" in server_log, server_log
    turns = [line for line in server_log.splitlines() if "response resp_" in line]
    assert len(turns) == 2, turns  # the call, then the answer
    sizes = [int(n) for line in turns for n in re.findall(r"(\d+) input", line)]
    assert len(sizes) == 2 and sizes[1] > sizes[0], turns  # the answer's prompt holds the output
    assert "<|" not in done.stdout  # no protocol text reached Codex


def _rollout(tmp_path: Path) -> list[dict[str, Any]]:
    """The items of Codex's session record (CODEX_HOME/sessions/…/rollout-*.jsonl)."""
    (path,) = (tmp_path / "codex-home" / "sessions").rglob("rollout-*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line["payload"] for line in lines if line.get("type") == "response_item"]
