"""The real Codex CLI (`codex exec`, 0.169) completes a turn against `serve --hosted-tools drop`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_processes import _free_port, _process, _wait_healthy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CODEX_VERSION = "0.169."
# Installed by `make setup` (tools/setup.sh) when npm reaches the registry.
CODEX = ROOT / ".tools" / "node_modules" / ".bin" / "codex"

# NOTE: Codex's default prompt is ~18k tokens (base instructions, skills, 7 function tools and the
# multi_agent_v1 namespace); the bundled model has a 2,048-token window. The turn below keeps
# what makes Codex different (developer messages, store: false, client_metadata,
# prompt_cache_key, include: reasoning.encrypted_content, a function tool and the hosted
# web_search tool) and switches off the bulky tools; the whole default request, namespace
# included, is checked in tests/http/test_agents.py.
CONFIG = """\
model = "{model}"
model_provider = "mlx"
model_instructions_file = "{instructions}"

[features]
goals = false
view_image = false
shell_tool = false

[agents]
enabled = false

[skills]
include_instructions = false

[model_providers.mlx]
name = "mlx-responses"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
"""


def _codex() -> Path:
    found = CODEX if CODEX.exists() else Path(shutil.which("codex") or "")
    if not found.is_file():
        reason = "npm is not installed" if shutil.which("npm") is None else "npm install failed"
        pytest.skip(f"the Codex CLI is unavailable ({reason}); `make setup` installs it in .tools/")
    version = subprocess.run(
        [str(found), "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    if CODEX_VERSION not in version:
        pytest.skip(f"Codex CLI {CODEX_VERSION}x needed, found {version.strip()!r}: `make setup`")
    return found


def test_codex_exec_completes_a_turn(model_path: Path, tmp_path: Path) -> None:
    codex = _codex()
    http, grpc_port = _free_port(), _free_port()
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    instructions = tmp_path / "instructions.md"
    instructions.write_text("You are a helpful assistant.\n")
    (home / "config.toml").write_text(
        CONFIG.format(model=model_path.name, instructions=instructions, port=http)
    )
    # No key, no login: a custom provider without env_key sends no Authorization.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env["CODEX_HOME"] = str(home)
    with _process(
        "serve",
        "--model",
        str(model_path),
        "--port",
        str(http),
        "--grpc-port",
        str(grpc_port),
        "--hosted-tools",
        "drop",
    ) as server:
        _wait_healthy(http, server)
        done = subprocess.run(
            [str(codex), "exec", "--json", "--skip-git-repo-check", "Reply with: hello"],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        server.terminate()
        server_log = server.communicate(timeout=15)[0].decode()
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    kinds = [e["type"] for e in events]
    assert "turn.completed" in kinds and "turn.failed" not in kinds, done.stdout
    items = [e["item"] for e in events if "item" in e]
    messages = [i["text"] for i in items if i["type"] == "agent_message"]
    assert messages == ["hello"], done.stdout
    usage = next(e["usage"] for e in events if e["type"] == "turn.completed")
    assert usage["input_tokens"] > 500  # Codex's own prompt reached the model
    assert "dropping hosted tool type 'web_search'" in server_log, server_log
