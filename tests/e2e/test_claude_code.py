"""The real Claude Code CLI (`claude -p`, 2.1) against `serve`: a one-shot turn on /v1/messages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.model import context_length_of

from tests.e2e.test_processes import _free_port, _process, _wait_healthy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_VERSION = "2.1."
# Installed by `make setup` (tools/setup.sh) when npm reaches the registry.
CLAUDE = ROOT / ".tools" / "node_modules" / ".bin" / "claude"
KEY = "sk-local-test"
PROMPT = "Reply with: hello"
# NOTE: Claude Code's default request (2.1.197) is 44,161 tokens on the bundled tokenizer: a
# 6 kB system prompt plus 24 tools (64 kB of JSON schemas). The bundled model's window is
# 2,048 tokens, so the default turn is refused with a 400 naming both figures, which Claude
# Code prints as "API Error: 400 ..." and exits 1 (test_default_prompt_is_refused_clearly).
# `--bare --system-prompt ... --tools ""` keeps Claude Code's own framing (billing header,
# agent preamble, <system-reminder> context, adaptive thinking, streaming): 283 tokens.
MINIMAL = ["--bare", "--system-prompt", "You are a helpful assistant.", "--tools", ""]


def _claude() -> Path:
    found = CLAUDE if CLAUDE.exists() else Path(shutil.which("claude") or "")
    if not found.is_file():
        reason = "npm is not installed" if shutil.which("npm") is None else "npm install failed"
        pytest.skip(f"Claude Code is unavailable ({reason}); `make setup` installs it in .tools/")
    version = subprocess.run(
        [str(found), "--version"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    if not version.startswith(CLAUDE_VERSION):
        pytest.skip(f"Claude Code {CLAUDE_VERSION}x needed, found {version.strip()!r}")
    return found


def _run(claude: Path, port: int, home: Path, *options: str) -> tuple[int, dict[str, Any]]:
    """`claude -p PROMPT --output-format json ...` pointed at the server; its result object."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(
        HOME=str(home),
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
        ANTHROPIC_API_KEY=KEY,  # sent as x-api-key
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
    )
    # The prompt goes first: --tools takes a variadic list.
    args = [str(claude), "-p", PROMPT, "--output-format", "json", *options]
    done = subprocess.run(
        args,
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout + done.stderr
    return done.returncode, json.loads(lines[-1])


@pytest.fixture(scope="module")
def server(model_path: Path) -> Any:
    http, grpc_port = _free_port(), _free_port()
    with _process(
        "serve",
        "--model",
        str(model_path),
        "--port",
        str(http),
        "--grpc-port",
        str(grpc_port),
        "--api-key",
        KEY,
    ) as proc:
        _wait_healthy(http, proc)
        yield http


def test_claude_code_completes_a_turn(server: int, model_path: Path, tmp_path: Path) -> None:
    claude = _claude()
    code, result = _run(claude, server, tmp_path, "--model", model_path.name, *MINIMAL)
    assert code == 0, result
    assert result["is_error"] is False and result["result"] == "hello", result
    usage = result["usage"]
    prompt = usage["input_tokens"] + usage["cache_read_input_tokens"]
    assert prompt > 200, "Claude Code's own framing reached the model"
    assert result["stop_reason"] == "end_turn"


def test_default_prompt_is_refused_clearly(server: int, model_path: Path, tmp_path: Path) -> None:
    claude = _claude()
    code, result = _run(claude, server, tmp_path, "--model", model_path.name)
    assert code != 0 and result["is_error"] is True and result["api_error_status"] == 400
    message = result["result"]
    window = context_length_of(json.loads((model_path / "config.json").read_text()))
    assert f"{window}-token context window" in message, message
    tokens = int(message.split("The input is ")[1].split(" tokens")[0])
    assert tokens > window, f"Claude Code's default prompt measured {tokens} tokens"
    assert tokens > 20_000, f"Claude Code's default prompt measured {tokens} tokens"
