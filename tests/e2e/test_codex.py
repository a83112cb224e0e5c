"""The real Codex CLI (`codex exec`, 0.169) completes a turn against `serve --hosted-tools drop`."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_processes import _free_port, _process, _wait_healthy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CODEX_VERSION = "0.169."
# Installed by `make setup` (tools/setup.sh) when npm reaches the registry.
CODEX = ROOT / ".tools" / "node_modules" / ".bin" / "codex"

# The first two tests trim Codex's turn (a short instructions file, no shell, view_image, agents or
# skills) to test the transports: Codex's default request is ~20k tokens (base instructions,
# skills, its tools and the multi_agent_v1 namespace) and the bundled model's window is 2,048.
# The last two send the whole default request: the bundled model's 64k context, over a sliding
# window of 2,048 tokens, answers `hello` behind it and writes a patch Codex applies.
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

# Codex's defaults: only the provider is ours.
DEFAULT_CONFIG = """\
model = "{model}"
model_provider = "mlx"

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


# A model catalog entry as Codex's own catalog writes one: it makes Codex send `apply_patch` as a
# custom (freeform) tool with its Lark grammar.
CATALOG = {
    "models": [
        {
            "slug": "{model}",
            "display_name": "{model}",
            "description": "local",
            "apply_patch_tool_type": "freeform",
            "shell_type": "shell_command",
            "visibility": "list",
            "supported_in_api": True,
            "priority": 1,
            "context_window": 2048,
            "supported_reasoning_levels": [],
            "default_reasoning_level": None,
            "input_modalities": ["text"],
            "truncation_policy": {"mode": "tokens", "limit": 10000},
            "supports_parallel_tool_calls": True,
            "support_verbosity": False,
            "experimental_supported_tools": [],
            "base_instructions": "You are a helpful assistant.",
        }
    ]
}


# Codex writes its cwd into every request, and which patch the bundled model writes depends on it
# (not on the date or time zone Codex writes beside it: the same patch under six zones). Under
# pytest's tmp dirs, whose numbers change run by run, it writes a finite patch in some and
# `+pnpnpn…` until max_output_tokens in others; six of seven fixed dirs measured complete the
# turn (training/tiny_chat/PILOTS.md, agent stage, part 6). The apply_patch test runs in this
# one, so its request is the same every run.
PINNED = Path("/tmp/mlx-responses-codex")


@pytest.fixture
def pinned_tmp() -> Iterator[Path]:
    """PINNED, emptied and held (a lock beside it) for one test."""
    with PINNED.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(PINNED, ignore_errors=True)
        PINNED.mkdir()
        try:
            yield PINNED
        finally:
            shutil.rmtree(PINNED, ignore_errors=True)


def _default_instructions() -> str:
    """Codex's own base instructions (what it sends a model without a catalog entry)."""
    body = json.loads((ROOT / "tests/fixtures/codex_0.169_request.json").read_text())["body"]
    text: str = body["input"][0]["content"][0]["text"]
    assert text.startswith("You are a coding agent running in the Codex CLI")
    return text


def _run_codex(
    model_path: Path,
    tmp_path: Path,
    *,
    prompt: str = "Reply with: hello",
    **options: Any,
) -> tuple[subprocess.CompletedProcess[str], str]:
    """`codex exec PROMPT` against `serve --hosted-tools drop`; Codex's run and the server's
    log (options: `_run_codex_sessions`')."""
    (done,), server_log = _run_codex_sessions(model_path, tmp_path, (prompt,), **options)
    return done, server_log


def _run_codex_sessions(
    model_path: Path,
    tmp_path: Path,
    prompts: tuple[str, ...],
    *,
    extra_config: str = "",
    catalog: bool = False,
    trimmed: bool = True,
    exec_args: tuple[str, ...] = (),
    timeout: float = 60,
) -> tuple[list[subprocess.CompletedProcess[str]], str]:
    """`codex exec PROMPT` for each prompt in turn (a session each, one work dir) against one
    `serve --hosted-tools drop`; Codex's runs and the server's log. ``trimmed`` is the short
    turn (CONFIG); otherwise Codex's default configuration."""
    codex = _codex()
    http, grpc_port = _free_port(), _free_port()
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    instructions = tmp_path / "instructions.md"
    instructions.write_text("You are a helpful assistant.\n")
    config = (CONFIG if trimmed else DEFAULT_CONFIG).format(
        model=model_path.name, instructions=instructions, port=http
    )
    if catalog:
        entry = dict(CATALOG["models"][0])
        if not trimmed:
            entry["base_instructions"] = _default_instructions()
            entry["context_window"] = 65536
        path = tmp_path / "catalog.json"
        path.write_text(json.dumps({"models": [entry]}).replace("{model}", model_path.name))
        config = f'model_catalog_json = "{path}"\n' + config
    (home / "config.toml").write_text(config + extra_config)
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
        # Its own disk tier: the session's shared one holds other Codex runs' checkpoints of
        # the same instructions (every 4,096 tokens), which a "first" session would read.
        "--prompt-cache-dir",
        str(tmp_path / "prompt-cache"),
    ) as server:
        _wait_healthy(http, server)
        runs = [
            subprocess.run(
                [str(codex), "exec", "--json", "--skip-git-repo-check", *exec_args, prompt],
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            for prompt in prompts
        ]
        server.terminate()
        server_log = server.communicate(timeout=15)[0].decode()
    return runs, server_log


def _events(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """Codex's `--json` events of a turn that completed."""
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    kinds = [e["type"] for e in events]
    assert "turn.completed" in kinds and "turn.failed" not in kinds, done.stdout
    return events


def _completed(
    done: subprocess.CompletedProcess[str], message: str
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The turn completed with ``message`` as Codex's last agent message; its usage and items."""
    events = _events(done)
    items = [e["item"] for e in events if "item" in e]
    messages = [i["text"] for i in items if i["type"] == "agent_message"]
    assert messages[-1:] == [message], done.stdout
    return _usage(done), items


def _usage(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """A completed turn's usage (its input, cached input and output tokens)."""
    usage: dict[str, int] = next(e["usage"] for e in _events(done) if e["type"] == "turn.completed")
    return usage


def _completed_with_hello(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    usage, items = _completed(done, "hello")
    assert [i["type"] for i in items if i["type"] == "agent_message"] == ["agent_message"]
    return usage


def test_codex_exec_completes_a_turn(model_path: Path, tmp_path: Path) -> None:
    done, server_log = _run_codex(model_path, tmp_path)
    usage = _completed_with_hello(done)
    assert usage["input_tokens"] > 500  # Codex's own prompt reached the model
    assert "dropping hosted tool type 'web_search'" in server_log, server_log


def test_codex_over_websocket_with_freeform_apply_patch(model_path: Path, tmp_path: Path) -> None:
    """Codex's WebSocket transport (its warm-up, then the turn) with apply_patch as a custom
    tool carrying its Lark grammar."""
    done, server_log = _run_codex(
        model_path,
        tmp_path,
        extra_config="supports_websockets = true\n",
        catalog=True,
    )
    usage = _completed_with_hello(done)
    assert usage["input_tokens"] > 500
    assert "GET /v1/responses" in server_log, server_log  # the socket
    assert "POST /v1/responses" not in server_log, server_log
    turns = [line for line in server_log.splitlines() if "response resp_" in line]
    assert len(turns) == 2 and " 0 output tokens" in turns[0], turns  # warm-up, then the turn


@pytest.fixture(scope="module")
def default_sessions(
    model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[subprocess.CompletedProcess[str]], str]:
    """Two `codex exec` sessions of Codex's whole default configuration in one work dir,
    against one server (`_run_codex_sessions`): the two tests below read the same runs (the
    first is the default turn itself) rather than each paying for its ~20k-token prefill."""
    return _run_codex_sessions(
        model_path,
        tmp_path_factory.mktemp("codex-default"),
        ("Reply with: hello", "Reply with: hi there"),
        catalog=True,
        trimmed=False,
        timeout=300,
    )


def test_codex_default_configuration_completes_a_turn(
    default_sessions: tuple[list[subprocess.CompletedProcess[str]], str],
) -> None:
    """Codex's whole default request: its base instructions, skills, shell, view_image,
    apply_patch (freeform, as its catalog sets it), the multi_agent_v1 namespace, goals and
    web_search (dropped by `--hosted-tools drop`), ~20k tokens before the user's words."""
    (done, _), server_log = default_sessions
    usage = _completed_with_hello(done)
    assert usage["input_tokens"] > 15_000, usage  # the default request, not a trimmed one
    assert "dropping hosted tool type 'web_search'" in server_log, server_log
    # Past the 2,048 positions it was trained on, the model attends over its declared window.
    assert "attends over a sliding window of 2048 tokens" in server_log, server_log


def test_a_second_codex_session_is_served_from_the_system_turn_it_shares(
    default_sessions: tuple[list[subprocess.CompletedProcess[str]], str],
) -> None:
    """Two `codex exec` sessions in one work dir, against one server: the second sends the
    same ~19.5k tokens of instructions, developer messages and tools, then other words. The
    bundled model's window has rotated far past them, so the first session's entries cannot be
    cut back to where the second parts; its prefill left one where the system turn ends, and
    the second session is served from it (measured: 8.5 s and 0 cached before, 0.7 s now)."""
    runs, _ = default_sessions
    first, second = (_usage(done) for done in runs)
    assert first["cached_input_tokens"] == 0
    assert 15_000 < second["cached_input_tokens"] < second["input_tokens"], second


def test_codex_applies_the_patch_the_model_writes(model_path: Path, pinned_tmp: Path) -> None:
    """Asked for a file, the model calls Codex's freeform apply_patch behind Codex's whole default
    request; the call's input is generated under Codex's Lark grammar, so Codex parses it and
    applies it in its work dir, sends the tool's output back, and the model answers.

    What the server owns is checked: a `custom_tool_call` (a `function_call` makes Codex abort
    with "incompatible payload"), an input Codex's parser takes (the grammar), each call and its
    output replayed in the next turn. Which file and line the bundled model writes is its own
    quality: it composes neither the name nor the line behind ~20k tokens (it writes `.txch`
    holding `pnput`, sometimes a second file), scored by `python -m
    training.tiny_chat.codex_replay` (training/tiny_chat/PILOTS.md, agent stage). The request is
    the form the model calls in most reliably (a quoted patch: 2 of 20 at short work dirs), and
    the work dir is fixed (PINNED): in some, the model's line runs to max_output_tokens."""
    done, server_log = _run_codex(
        model_path,
        pinned_tmp,
        catalog=True,
        trimmed=False,
        prompt="Use apply_patch to create hello.txt containing: hi",
        exec_args=("--sandbox", "workspace-write"),
        timeout=300,
    )
    assert "incompatible payload" not in done.stdout + done.stderr
    items = [e["item"] for e in _events(done) if e["type"] == "item.completed"]
    *changes, answer = items
    assert changes and answer["type"] == "agent_message" and answer["text"].strip(), done.stdout
    # Each call is a patch Codex applied: it adds a file in the work dir holding the model's lines.
    work = pinned_tmp / "work"
    added = [change for item in changes for change in item["changes"]]
    assert all(i["type"] == "file_change" and i["status"] == "completed" for i in changes), items
    assert all(change["kind"] == "add" for change in added), added
    paths = {Path(change["path"]) for change in added}
    assert paths == set(work.iterdir()), (paths, list(work.iterdir()))
    assert all(path.read_text().endswith("\n") for path in paths)  # each added line ends with one
    # A response per call, then the answer after Codex's last tool output.
    turns = [line for line in server_log.splitlines() if "response resp_" in line]
    assert len(turns) == len(changes) + 1, turns
