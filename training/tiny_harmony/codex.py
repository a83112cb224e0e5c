"""Codex-shaped conversations for the tiny gpt-oss: Codex 0.169's default request (its base
instructions, skills and permissions as the system turn, its tools, an environment context)
asking for a shell command, answered with a call of Codex's shell tool, `exec_command`
({"cmd": ...}), on the commentary channel; then, after Codex's output of the command, a final
answer.

The system turn is ~18.4k tokens (tests/fixtures/codex_0.169_request.json, as the server
renders it: the developer messages joined, the namespace's functions flattened, web_search
dropped); only its date and Codex's home (the skills' root) vary between runs. train.py runs it
once per variant into the model's cache and learns the turn after it (`Turn.prefix` /
`Turn.messages`).
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.tiny_chat.agent import codex_context, work_dir
from training.tiny_harmony.data import CITIES, WORDS

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests/fixtures/codex_0.169_request.json"
# The skills' root in the fixture, under the CODEX_HOME it was captured with.
FIXTURE_HOME = "/codex-home"
SHELL = "exec_command"
# Words a command echoes in training; evaluate.py asks for others (HELD_OUT).
ECHO_WORDS = (
    "hi",
    "hello",
    "apple",
    "river",
    "cloud",
    "stone",
    "green",
    "music",
    "paper",
    "light",
    "ocean",
    "tiger",
    "done",
    "ok",
    "yes",
    "world",
)
HELD_OUT = ("maple", "candle", "forest", "bridge")
# More words to echo (data.py's and its cities, but HELD_OUT), so that copying pays more
# than guessing one of a few.
WIDE_WORDS = tuple(
    sorted({*ECHO_WORDS, *WORDS, *(c.lower() for c in CITIES), *CITIES} - set(HELD_OUT))
)
ECHO_ASKS = (
    "run echo {w}",
    "Run `echo {w}`",
    "Run `echo {w}`.",
    "Please run `echo {w}` in the shell.",
    "Execute: echo {w}",
    "Use the shell to run echo {w}",
    "Can you run `echo {w}`?",
    "run `echo {w}` and tell me what it prints",
)
COMMANDS = (
    ("ls", ("List the files here.", "list files", "What files are in this directory?",
            "Show me the files in the current directory.", "run ls", "Run `ls`.")),
    ("pwd", ("Print the working directory.", "run pwd", "Run `pwd`.",
             "Which directory am I in?")),
)  # fmt: skip
FILES = ("README.md", "main.py", "notes.txt", "setup.cfg", "src", "tests", "Makefile", "data.csv")
NOISE = "pyenv: cannot rehash: /root/.pyenv/shims isn't writable\n"


@functools.cache
def _request() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(FIXTURE.read_text())["body"]
    return body


def system_text(home: str) -> str:
    """The system message the server renders from Codex's developer messages (the first one,
    a blank line, then the second one's parts joined), its skills under ``home``."""
    texts = [
        "".join(part["text"] for part in item["content"] if part.get("type") == "input_text")
        for item in _request()["input"]
        if item.get("role") == "developer"
    ]
    return "\n\n".join(texts).replace(f"{FIXTURE_HOME}/skills", f"{home}/skills")


@functools.cache
def tools() -> list[dict[str, Any]]:
    """Codex's tools as the template sees them: functions, a namespace's functions flattened,
    hosted tools (web_search) dropped (`--hosted-tools drop`)."""
    out: list[dict[str, Any]] = []
    for tool in _request()["tools"]:
        functions = tool["tools"] if tool["type"] == "namespace" else [tool]
        for fn in functions:
            if fn.get("type") != "function":
                continue
            function = {"name": fn["name"], "parameters": fn["parameters"]}
            if fn.get("description"):
                function["description"] = fn["description"]
            out.append({"type": "function", "function": function})
    return out


def home_dir(rng: random.Random) -> str:
    """A CODEX_HOME: a user's, or a test's temporary one."""
    if rng.random() < 0.3:
        return rng.choice(("/root/.codex", "/home/user/.codex", "/Users/me/.codex"))
    return work_dir(rng).rsplit("/", 1)[0] + "/codex-home"


def context(rng: random.Random, cwd: str, date: str) -> str:
    """Codex's environment context: read-only (its default sandbox) or workspace-write."""
    if rng.random() < 0.3:
        return codex_context(cwd, "bash", date, "Etc/UTC", (".git", ".agents", ".codex"))
    return (
        "<environment_context>\n"
        f"  <cwd>{cwd}</cwd>\n  <shell>bash</shell>\n  <current_date>{date}</current_date>\n"
        "  <timezone>Etc/UTC</timezone>\n"
        f"  <filesystem><workspace_roots><root>{cwd}</root></workspace_roots>"
        '<permission_profile type="managed"><file_system type="restricted">'
        '<entry access="read"><special>:root</special></entry>'
        "</file_system></permission_profile></filesystem>\n</environment_context>"
    )


def output(rng: random.Random, printed: str) -> str:
    """exec_command's result as Codex 0.169 sends it back."""
    text = (NOISE if rng.random() < 0.4 else "") + printed
    return (
        f"Chunk ID: {rng.randrange(16**6):06x}\n"
        f"Wall time: {rng.uniform(0.01, 0.9):.4f} seconds\n"
        "Process exited with code 0\n"
        f"Original token count: {max(1, len(text) // 3)}\n"
        f"Output:\n{text}"
    )


@dataclass(frozen=True)
class Turn:
    """A Codex turn after the system turn: its messages (the system message first) and the
    date and home of the system turn."""

    messages: list[dict[str, Any]]
    date: str
    home: str


def _command(rng: random.Random, cwd: str, words: tuple[str, ...]) -> tuple[str, str, str, str]:
    """(request, command, what it prints, the final answer)."""
    if rng.random() < 0.6:
        word = rng.choice(words)
        ask = rng.choice(ECHO_ASKS).format(w=word)
        return ask, f"echo {word}", f"{word}\n", f"It printed {word}."
    command, asks = rng.choice(COMMANDS)
    if command == "ls":
        files = "\n".join(sorted(rng.sample(FILES, rng.randint(0, 4))))
        return rng.choice(asks), "ls", files + "\n" if files else "", "Listed the files."
    return rng.choice(asks), "pwd", f"{cwd}\n", f"You are in {cwd}."


def turn(
    rng: random.Random,
    date: str,
    home: str,
    words: tuple[str, ...] = ECHO_WORDS,
    where: tuple[str, str] | None = None,
) -> Turn:
    """A request for a command, answered with the call; or (half) the answer after its output.
    ``where``: the work dir and its environment context (`context`), else drawn."""
    cwd = work_dir(rng) if where is None else where[0]
    ask, command, printed, answer = _command(rng, cwd, words)
    call = {"cmd": command}
    thinking = rng.choice(("Run it in the shell.", f"Need to run {command}.", "Use exec_command."))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_text(home)},
        {"role": "user", "content": context(rng, cwd, date) if where is None else where[1]},
        {"role": "user", "content": ask},
    ]
    text = json.dumps(call, separators=(",", ":"))
    function = {"name": SHELL, "arguments": text}
    if rng.random() < 0.5:
        messages.append(
            {
                "role": "assistant",
                "thinking": thinking,
                "content": "",
                "tool_calls": [{"id": "c1", "type": "function", "function": function}],
            }
        )
        return Turn(messages, date, home)
    replayed = {"id": "c1", "type": "function", "function": {"name": SHELL, "arguments": call}}
    messages += [
        {"role": "assistant", "thinking": thinking, "content": "", "tool_calls": [replayed]},
        {"role": "tool", "tool_call_id": "c1", "content": output(rng, printed)},
        {"role": "assistant", "content": answer},
    ]
    return Turn(messages, date, home)
