"""The OpenAI Agents SDK's `ShellTool`, `ApplyPatchTool` and `LocalShellTool` against the
bundled model: the model calls (forced on the first turn), the SDK executes in a temp dir, the
outputs go back as `shell_call_output` / `apply_patch_call_output` / `local_shell_call_output`
items, and the run ends with an answer.

NOTE: the bundled model's commands are noise and it often calls again; the prompts and output
budgets here are ones where it answers within the turn limit (deterministic at temperature 0).
"""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.stack import Stack

agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK (pip openai-agents)")
from agents.apply_diff import apply_diff  # noqa: E402

# The model is tiny: its commands are mostly noise. Only these run (in the temp dir, no
# shell); anything else answers as a shell would, `command not found`.
SAFE_COMMANDS = {"ls", "cat", "echo", "pwd"}


def _run(command: str, cwd: Path) -> tuple[str, str, int]:
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = command.split()
    if not argv or argv[0] not in SAFE_COMMANDS:
        name = argv[0] if argv else ""
        return "", f"sh: {name}: command not found\n", 127
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
    return done.stdout, done.stderr, done.returncode


class Workspace:
    """An ApplyPatchEditor writing under a temp dir, and the executors of both shells."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: list[list[str]] = []
        self.operations: list[Any] = []

    def _path(self, relative: str) -> Path:
        path = (self.root / relative).resolve()
        assert path.is_relative_to(self.root.resolve()), relative
        return path

    def create_file(self, operation: Any) -> Any:
        self.operations.append(operation)
        path = self._path(operation.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(apply_diff("", operation.diff or "", mode="create"))
        return agents.ApplyPatchResult(output=f"Created {operation.path}")

    def update_file(self, operation: Any) -> Any:
        self.operations.append(operation)
        path = self._path(operation.path)
        if not path.exists():
            return agents.ApplyPatchResult(status="failed", output="No such file")
        path.write_text(apply_diff(path.read_text(), operation.diff or ""))
        return agents.ApplyPatchResult(output=f"Updated {operation.path}")

    def delete_file(self, operation: Any) -> Any:
        self.operations.append(operation)
        path = self._path(operation.path)
        if not path.exists():
            return agents.ApplyPatchResult(status="failed", output="No such file")
        path.unlink()
        return agents.ApplyPatchResult(output=f"Deleted {operation.path}")

    def shell(self, request: Any) -> Any:
        commands = list(request.data.action.commands)
        self.commands.append(commands)
        output = []
        for command in commands:
            stdout, stderr, code = _run(command, self.root)
            outcome = agents.ShellCallOutcome(type="exit", exit_code=code)
            output.append(
                agents.ShellCommandOutput(
                    stdout=stdout, stderr=stderr, outcome=outcome, command=command
                )
            )
        return agents.ShellResult(output=output)

    def local_shell(self, request: Any) -> str:
        argv = list(request.data.action.command)
        self.commands.append(argv)
        stdout, stderr, code = _run(shlex.join(argv), self.root)
        return f"{stdout}{stderr}exit code {code}"


def _agent(stack: Stack, tools: list[Any], choice: str, max_tokens: int) -> Any:
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    model = agents.OpenAIResponsesModel(model=stack.settings.models[0].name, openai_client=client)
    return agents.Agent(
        name="coder",
        instructions="You edit files and run commands in the user's workspace.",
        model=model,
        tools=tools,
        # The first turn must call it; the SDK then resets the choice so a later turn answers.
        model_settings=agents.ModelSettings(
            tool_choice=choice, max_tokens=max_tokens, temperature=0
        ),
    )


def _run_agent(agent: Any, prompt: str, streamed: bool) -> Any:
    if not streamed:
        return asyncio.run(agents.Runner.run(agent, prompt, max_turns=8))

    async def run() -> Any:
        result = agents.Runner.run_streamed(agent, prompt, max_turns=8)
        async for _ in result.stream_events():
            pass
        return result

    return asyncio.run(run())


def _raw(result: Any, kind: str) -> list[Any]:
    items = [i.raw_item for i in result.new_items if i.type == kind]
    return [i if isinstance(i, dict) else i.model_dump() for i in items]


def _answered(result: Any) -> None:
    assert len(result.raw_responses) >= 2  # the outputs went back and the model went on
    assert isinstance(result.final_output, str)
    assert result.new_items[-1].type == "message_output_item"


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_agent_applies_a_patch_in_a_temp_dir(stack: Stack, tmp_path: Path, streamed: bool) -> None:
    agents.set_tracing_disabled(True)
    workspace = Workspace(tmp_path)
    tool = agents.ApplyPatchTool(editor=workspace)
    result = _run_agent(
        _agent(stack, [tool], "apply_patch", 200), "Create hello.txt that says hi.", streamed
    )
    calls = _raw(result, "tool_call_item")
    outputs = _raw(result, "tool_call_output_item")
    assert calls[0]["type"] == "apply_patch_call"
    assert outputs[0]["type"] == "apply_patch_call_output"
    assert outputs[0]["call_id"] == calls[0]["call_id"]
    first = workspace.operations[0]
    assert (first.type, first.path) == (
        calls[0]["operation"]["type"],
        calls[0]["operation"]["path"],
    )
    if first.type == "create_file":  # the file the patch made is in the temp dir
        expected = apply_diff("", first.diff, mode="create")
        assert (tmp_path / first.path).read_text() == expected
    _answered(result)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_agent_runs_shell_commands_in_a_temp_dir(
    stack: Stack, tmp_path: Path, streamed: bool
) -> None:
    agents.set_tracing_disabled(True)
    workspace = Workspace(tmp_path)
    tool = agents.ShellTool(executor=workspace.shell)
    result = _run_agent(
        _agent(stack, [tool], "shell", 150), "Use the shell tool to run ls.", streamed
    )
    calls = _raw(result, "tool_call_item")
    outputs = _raw(result, "tool_call_output_item")
    assert calls[0]["type"] == "shell_call"
    assert workspace.commands[0] == calls[0]["action"]["commands"]
    assert outputs[0]["type"] == "shell_call_output"
    assert len(outputs[0]["output"]) == len(workspace.commands[0])
    _answered(result)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_agent_runs_a_local_shell_command(stack: Stack, tmp_path: Path, streamed: bool) -> None:
    agents.set_tracing_disabled(True)
    workspace = Workspace(tmp_path)
    tool = agents.LocalShellTool(executor=workspace.local_shell)
    result = _run_agent(_agent(stack, [tool], "required", 250), "Run ls.", streamed)
    calls = _raw(result, "tool_call_item")
    assert calls[0]["type"] == "local_shell_call"
    assert workspace.commands[0] == calls[0]["action"]["command"]
    assert _raw(result, "tool_call_output_item")[0]["type"] == "local_shell_call_output"
    _answered(result)
