"""The real Claude Code CLI (`claude -p`, 2.1) against `serve`: turns on /v1/messages, tools too."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.e2e.test_processes import _free_port, _process, _wait_healthy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_VERSION = "2.1."
# Installed by `make setup` (tools/setup.sh) when npm reaches the registry.
CLAUDE = ROOT / ".tools" / "node_modules" / ".bin" / "claude"
KEY = "sk-local-test"
PROMPT = "Reply with: hello"
# NOTE: Claude Code's default request (2.1.197) is 44,161 tokens on the bundled tokenizer: a
# 6 kB system prompt plus 24 tools (64 kB of JSON schemas, `propertyNames` among them). The
# bundled model's context is 65,536 tokens over a 2,048-token sliding window, so it answers it
# (test_default_configuration_completes_a_turn); a model with a smaller context refuses it with a
# 400 naming both figures, which Claude Code prints as "API Error: 400 ..." and exits 1
# (test_default_prompt_is_refused_clearly). `--bare --system-prompt ... --tools ""` keeps
# Claude Code's own framing (billing header, agent preamble, <system-reminder> context,
# adaptive thinking, streaming): 283 tokens.
MINIMAL = ["--bare", "--system-prompt", "You are a helpful assistant.", "--tools", ""]


# A guard against a CLI that hangs, not a figure: on a loaded machine a session's prefill
# alone can take minutes (the test's own pytest timeout bounds the whole).
CLI_HANG_S = 480


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


def _run(
    claude: Path, port: int, home: Path, *options: str, prompt: str = PROMPT, stream: bool = False
) -> tuple[int, list[dict[str, Any]]]:
    """`claude -p PROMPT --output-format json ...` pointed at the server; the JSON it printed,
    the result object last (``stream``: `stream-json --verbose`, every message before it)."""
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
    output = ["stream-json", "--verbose"] if stream else ["json"]
    args = [str(claude), "-p", prompt, "--output-format", *output, *options]
    done = subprocess.run(
        args,
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_HANG_S,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout + done.stderr
    return done.returncode, lines


def _prompt_tokens(usage: dict[str, Any]) -> int:
    """The whole prompt, as Anthropic's usage splits it: new, read from and written to cache."""
    return int(
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage.get("cache_creation_input_tokens", 0)
    )


def _serve(model_path: Path, *extra: str) -> Any:
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
        *extra,
    ) as proc:
        _wait_healthy(http, proc)
        yield http


@pytest.fixture(scope="module")
def server(model_path: Path) -> Any:
    yield from _serve(model_path)


@pytest.fixture
def small_server(model_path: Path, tmp_path: Path) -> Any:
    """The bundled model declaring a 32,768-token context: Claude Code's default request is
    longer."""
    small = tmp_path / model_path.name
    shutil.copytree(model_path, small)
    config = json.loads((small / "config.json").read_text())
    config["max_position_embeddings"] = 32768
    (small / "config.json").write_text(json.dumps(config))
    yield from _serve(small)


def test_claude_code_completes_a_turn(server: int, model_path: Path, tmp_path: Path) -> None:
    claude = _claude()
    code, [result] = _run(claude, server, tmp_path, "--model", model_path.name, *MINIMAL)
    assert code == 0, result
    assert result["is_error"] is False and result["result"] == "hello", result
    usage = result["usage"]
    prompt = _prompt_tokens(usage)
    assert prompt > 200, "Claude Code's own framing reached the model"
    assert result["stop_reason"] == "end_turn"


def test_a_tool_round_trip(server: int, model_path: Path, tmp_path: Path) -> None:
    """Claude Code reads the model's streamed `tool_use` (its Read tool, the input under Read's
    schema), runs the tool, sends the `tool_result` back, and the model's next turn follows.

    Two turns at most: which file the bundled model names is its own (one that does not exist,
    so the result is Read's error), and after it the model may call again rather than answer,
    which ends the run at the turn limit."""
    claude = _claude()
    minimal = [*MINIMAL[:-1], "Read", "--max-turns", "2"]  # --tools Read
    code, events = _run(
        claude,
        server,
        tmp_path,
        "--model",
        model_path.name,
        *minimal,
        prompt="Use the Read tool.",
        stream=True,
    )
    *messages, result = events
    assert result["subtype"] in ("success", "error_max_turns"), result
    assert code == (0 if result["subtype"] == "success" else 1), result
    turns = [e for e in messages if e["type"] in ("assistant", "user")]
    blocks = [(e["type"], b) for e in turns for b in e["message"]["content"] if isinstance(b, dict)]
    calls = [b for kind, b in blocks if kind == "assistant" and b["type"] == "tool_use"]
    results = [b for kind, b in blocks if kind == "user" and b["type"] == "tool_result"]
    assert calls and results, blocks
    for call in calls:
        assert call["name"] == "Read" and isinstance(call["input"]["file_path"], str), call
    assert [r["tool_use_id"] for r in results] == [c["id"] for c in calls], blocks
    # The model's second turn, after the first result: text, or another call.
    after = blocks[blocks.index(("user", results[0])) + 1 :]
    assert any(kind == "assistant" and b["type"] in ("text", "tool_use") for kind, b in after)


def test_default_configuration_completes_a_turn(
    server: int, model_path: Path, tmp_path: Path
) -> None:
    """Claude Code's whole default request: its system prompt and 24 tools (~44k tokens, whose
    schemas hold keywords the grammar leaves out), streamed on /v1/messages. What the bundled
    model answers behind it is its own (a word or two, not the `hello` asked for).

    A second session in the same directory sends the same system prompt and tools: the bundled
    model's window has rotated far past them, and the first prefill left an entry where that
    system turn ends, so the second is served from it (measured: 19.2 s and nothing cached
    before such entries, 2.7 s now)."""
    claude = _claude()
    for words in (PROMPT, "Reply with: hi there"):
        code, [result] = _run(claude, server, tmp_path, "--model", model_path.name, prompt=words)
        assert code == 0, result
        assert result["is_error"] is False and result["stop_reason"] == "end_turn", result
        usage = result["usage"]
        assert _prompt_tokens(usage) > 40_000, usage
        assert usage["output_tokens"] > 0, usage
    assert usage["cache_read_input_tokens"] > 35_000, usage


def test_default_prompt_is_refused_clearly(
    small_server: int, model_path: Path, tmp_path: Path
) -> None:
    claude = _claude()
    code, [result] = _run(claude, small_server, tmp_path, "--model", model_path.name)
    assert code != 0 and result["is_error"] is True and result["api_error_status"] == 400
    message = result["result"]
    assert "32768-token context window" in message, message
    tokens = int(message.split("The input is ")[1].split(" tokens")[0])
    assert tokens > 40_000, f"Claude Code's default prompt measured {tokens} tokens"


def test_a_restarted_server_serves_the_default_prompt_from_disk(
    model_path: Path, tmp_path: Path
) -> None:
    """Claude Code's default request (~44k tokens) against `serve`, the server restarted
    between two sessions on the same --prompt-cache-dir: the second session reads at least 90%
    of its prompt from the prompt cache's disk tier (tests/benchmarks/bench_claude_code_restart.py
    prints the wall times: cold, warm from memory, warm from disk)."""
    claude = _claude()
    cache = ["--prompt-cache-dir", str(tmp_path / "prompt-cache")]
    sessions = []
    for words in (PROMPT, "Reply with: hi there"):
        serving = _serve(model_path, *cache)
        port = next(serving)
        try:
            code, [result] = _run(claude, port, tmp_path, "--model", model_path.name, prompt=words)
        finally:
            serving.close()  # SIGTERM: the engine writes what it has queued before it exits
        assert code == 0 and result["is_error"] is False, result
        sessions.append(result["usage"])
    first, second = sessions
    assert first["cache_read_input_tokens"] == 0, first  # a new folder: nothing on disk yet
    prompt = _prompt_tokens(second)
    assert prompt > 40_000, second
    assert second["cache_read_input_tokens"] >= 0.9 * prompt, second


@pytest.fixture(scope="module")
def vlm_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("mlx_vlm")
    from tests.support.random_vlm import build_random_vlm, end_at_once

    folder = build_random_vlm(tmp_path_factory.mktemp("vlm") / "tiny-vlm")
    yield from _serve(end_at_once(folder))


def test_an_image_in_the_prompt_completes_a_turn(vlm_server: int, tmp_path: Path) -> None:
    """A pasted screenshot: the user message's base64 `image` block (stream-json input, as the
    CLI sends a pasted image) reaches the tiny VLM's vision tower on /v1/messages, and the turn
    completes. The model ends its turn at once (random_vlm.end_at_once): Claude Code takes a
    turn cut at its token cap for an error, and a random model's replayed text may spell the
    image tokens, which the core refuses in an assistant turn."""
    claude = _claude()
    buffer = io.BytesIO()
    Image.new("RGB", (56, 56), (200, 30, 30)).save(buffer, format="PNG")
    image = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(buffer.getvalue()).decode(),
        },
    }
    content = [{"type": "text", "text": "What color is this image?"}, image]
    line = json.dumps({"type": "user", "message": {"role": "user", "content": content}})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(
        HOME=str(tmp_path),
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{vlm_server}",
        ANTHROPIC_API_KEY=KEY,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
    )
    args = [str(claude), "-p", "--input-format", "stream-json", "--output-format", "stream-json"]
    done = subprocess.run(
        [*args, "--verbose", "--model", "tiny-vlm", *MINIMAL],
        cwd=tmp_path,
        env=env,
        input=line + "\n",
        capture_output=True,
        text=True,
        timeout=CLI_HANG_S,
        check=False,
    )
    events = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    assert events, done.stdout + done.stderr
    result = events[-1]
    # NOTE: with stream-json input the CLI exits 0 on an API error too (is_error tells).
    assert done.returncode == 0 and result["type"] == "result" and not result["is_error"], result
    assert result["stop_reason"] == "end_turn", result
    text = httpx.get(
        f"http://127.0.0.1:{vlm_server}/metrics", headers={"x-api-key": KEY}, timeout=10
    ).text
    misses = re.search(r"^mlx_responses_image_encoding_cache_misses_total\{.*\} (\S+)$", text, re.M)
    assert misses and float(misses.group(1)) >= 1, "the image ran through the vision tower"
