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

import re
from pathlib import Path

import pytest

from tests.e2e.test_codex import _events, _run_codex

pytestmark = [
    pytest.mark.e2e,
    # The committed tiny gpt-oss declares 4,096 positions (Codex's request does not fit) and was
    # not trained on Codex's turn; the Codex-trained checkpoints ran this test's whole chain (the
    # call read, Codex running it, the turn completed) but wrote no usable command and lost the
    # weather call's city: training/tiny_harmony/NOTES.md.
    pytest.mark.skip(reason="no tiny gpt-oss passes it yet: training/tiny_harmony/NOTES.md"),
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
    assert echoed.group(1) in command["aggregated_output"].splitlines(), command
    # Then the model answered after the output: the turn ends in Codex's agent message.
    assert items[-1]["type"] == "agent_message" and items[-1]["text"].strip(), items
    usage = next(e["usage"] for e in events if e["type"] == "turn.completed")
    assert usage["input_tokens"] > 30_000, usage  # two requests of Codex's whole default prompt
    assert "dropping hosted tool type 'web_search'" in server_log, server_log
    turns = [line for line in server_log.splitlines() if "response resp_" in line]
    assert len(turns) == 2, turns  # the call, then the answer
    assert "<|" not in done.stdout  # no protocol text reached Codex
