"""What coding agents put around a request: long instructions, many tools, and apply_patch.

Codex's default request is ~20k tokens of instructions and tool schemas before the user's words.
Training rows stay short (2,048 tokens), so three things teach the model to see past it:

- instructions cut from real technical prose (this project's own README and docs, snapshotted in
  ``agent_corpus.md``; Codex's text is kept for evaluation, training/tiny_chat/long_context.py);
- decoy tools with long descriptions and several typed parameters, never to be called;
- position skips (PoSE, train.py): a row's later part is shifted by up to ~30k positions, so
  every distance up to the 32k window is one the model has attended across.

And one behaviour of its own: asked to add a file, it calls Codex's ``apply_patch`` custom tool
(shown to it as a function taking one string, ``input``, as the server lowers custom tools).
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).with_name("agent_corpus.md")
# Codex 0.169's own first request (its developer messages: base instructions, then skills).
CODEX_REQUEST = Path(__file__).resolve().parents[2] / "tests/fixtures/codex_0.169_request.json"
# ~2 characters per token for this tokenizer on English prose (spelled in letter pairs).
CHARS_PER_TOKEN = 2.0
# ~1.7 on Codex's own text (markdown, paths and code).
CODEX_CHARS_PER_TOKEN = 1.7

# Codex's apply_patch tool as the model sees it (service/responses/custom_tools.py lowers a
# custom tool to this function; the description is Codex 0.169's own).
APPLY_PATCH = "apply_patch"
APPLY_PATCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": APPLY_PATCH,
        "description": (
            "The `apply_patch` tool can be used to edit files. This is a FREEFORM tool, so do "
            "not wrap the patch in JSON."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "input": {
                    "type": "string",
                    "description": (
                        "The tool's input: plain text, not JSON, following its lark grammar."
                    ),
                }
            },
            "required": ["input"],
            "additionalProperties": False,
        },
    },
}
PATCH_REQUESTS = (
    "Use the apply_patch tool to add a file {f} that says {c}.",
    "Use the apply_patch tool to add a file {f} that says {c}.",
    "Use apply_patch to create {f} containing: {c}",
    "Create a file {f} that says {c}.",
    "Add a file {f} with the text: {c}",
    "Write {c} to a new file {f}.",
    "Please create the file {f}. It should say {c}.",
    "Make a new file called {f} containing {c}.",
)
# Requests that hand the model the patch itself (quoted whole): applying it is copying it, which a
# model this small does by induction, where composing a file name from a sentence it cannot.
PATCH_GIVEN = (
    "Use the apply_patch tool to apply this patch:\n{p}",
    "Use the apply_patch tool to apply this patch:\n\n{p}",
    "Apply this patch with apply_patch:\n{p}",
    "Use apply_patch:\n{p}",
    "Please apply the following patch.\n\n{p}",
)
# The hidden paths of its work dir that Codex's sandbox lets be read, in its order.
CODEX_HIDDEN_PATHS = (".git", ".agents", ".codex", ".aws")
PATCH_RESULTS = (
    "Success. Updated the following files:\nA {f}\n",
    "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA {f}\n",
    '{{"output":"Success. Updated the following files:\\nA {f}\\n","metadata":{{"exit_code":0}}}}',
)
PATCH_DONE = "Done."
EXTENSIONS = ("txt", "txt", "md", "py", "json", "toml", "sh", "rs")
# What codex_replay.py draws its cases from (a file WORD.EXT holding one WORD): training never
# writes one of these name/line pairs, so the replay scores a copy, not a memorised patch.
REPLAY_WORDS = (
    "hello", "hi", "butter", "planet", "notes", "apple", "green", "todo", "world", "river",
)  # fmt: skip
REPLAY_EXTENSIONS = ("txt", "md", "py", "json", "toml")

# Tool names as agents have them (Codex, Claude Code, the Agents SDK); decoys, never called.
DECOY_NAMES = (
    "exec_command", "write_stdin", "request_user_input", "view_image", "update_plan",
    "read_file", "list_dir", "grep_files", "web_fetch", "spawn_agent", "send_input",
    "wait_agent", "close_agent", "get_goal", "create_goal", "update_goal", "shell",
    "todo_write", "glob", "notebook_edit", "task", "kill_shell", "multi_edit", "bash_output",
)  # fmt: skip
PARAM_NAMES = (
    "cmd", "workdir", "timeout_ms", "session_id", "chars", "path", "pattern", "limit",
    "offset", "url", "prompt", "agent_id", "message", "questions", "plan", "explanation",
    "justification", "max_output_tokens", "yield_time_ms", "login", "shell", "items", "status",
)  # fmt: skip
PARAM_TYPES = ("string", "string", "string", "integer", "boolean", "number", "array")


@cache
def corpus_lines() -> tuple[str, ...]:
    return tuple(CORPUS.read_text().splitlines(keepends=True))


def prose(rng: random.Random, tokens: int) -> str:
    """About ``tokens`` tokens of real technical prose, whole lines from a random place."""
    lines = corpus_lines()
    budget = int(tokens * CHARS_PER_TOKEN)
    start = rng.randrange(len(lines))
    out: list[str] = []
    size = 0
    i = start
    while size < budget:
        line = lines[i % len(lines)]
        if size + len(line) > budget and out:
            line = line[: budget - size]
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).strip() or "Follow the instructions."


def replay_case(name: str, content: str) -> bool:
    """Whether a patch adding ``name`` with the line ``content`` is one codex_replay can ask for."""
    word, _, ext = name.partition(".")
    return word in REPLAY_WORDS and ext in REPLAY_EXTENSIONS and content in REPLAY_WORDS


@cache
def codex_developer_texts() -> tuple[str, ...]:
    """Codex 0.169's developer messages as the server renders them (each one's parts joined)."""
    body = json.loads(CODEX_REQUEST.read_text())["body"]
    return tuple(
        "".join(c["text"] for c in item["content"] if c.get("type") == "input_text")
        for item in body["input"]
        if item.get("role") == "developer"
    )


def codex_preamble(rng: random.Random, tokens: int) -> list[str]:
    """Codex's developer messages as a 2,048-token window holds them when the request comes: the
    last ~``tokens`` tokens of them (its skills message, then the base instructions' tail), each
    message kept as its own, cut at a line start. A random line-aligned trim of up to a quarter
    varies where the text starts."""
    budget = int(tokens * CODEX_CHARS_PER_TOKEN)
    out: list[str] = []
    for whole in reversed(codex_developer_texts()):
        if budget <= 0:
            break
        text = whole
        if len(text) > budget:
            cut = text[len(text) - budget :]
            text = cut[cut.find("\n") + 1 :] if "\n" in cut else cut
        budget -= len(text)
        if text.strip():
            out.append(text)
    out.reverse()
    if out and rng.random() < 0.5:
        lines = out[0].splitlines(keepends=True)
        out[0] = "".join(lines[rng.randrange(max(1, len(lines) // 4)) :]) or out[0]
    return out


def environment_context(rng: random.Random) -> str:
    """A user message of context, as Codex sends one before the request: its working directory,
    shell and date, and often (Codex 0.169, a sandboxed turn) its time zone and the sandbox's
    filesystem permissions as one long line of XML."""
    cwd = work_dir(rng)
    shell = rng.choice(("bash", "zsh"))
    date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    zone = hidden = None
    if rng.random() < 0.6:
        zone = rng.choice(("Etc/UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"))
        if rng.random() < 0.7:
            hidden = tuple(path for path in CODEX_HIDDEN_PATHS if rng.random() < 0.8)
    return codex_context(cwd, shell, date, zone, hidden)


def codex_context(
    cwd: str, shell: str, date: str, zone: str | None, hidden: tuple[str, ...] | None
) -> str:
    """Codex 0.169's context message: with a time zone, and with the sandbox's filesystem line
    (the workspace root, what may be read and written) when ``hidden`` (the work dir's hidden
    paths it lets be read) is given."""
    lines = [
        f"  <cwd>{cwd}</cwd>",
        f"  <shell>{shell}</shell>",
        f"  <current_date>{date}</current_date>",
    ]
    if zone is not None:
        lines.append(f"  <timezone>{zone}</timezone>")
    if hidden is not None:
        entries = [
            '<entry access="read"><special>:root</special></entry>',
            f'<entry access="write"><path>{cwd}</path></entry>',
            '<entry access="write"><special>:slash_tmp</special></entry>',
            '<entry access="write"><special>:tmpdir</special></entry>',
            *(f'<entry access="read"><path>{cwd}/{path}</path></entry>' for path in hidden),
        ]
        lines.append(
            f"  <filesystem><workspace_roots><root>{cwd}</root></workspace_roots>"
            '<permission_profile type="managed"><file_system type="restricted">'
            + "".join(entries)
            + "</file_system></permission_profile></filesystem>"
        )
    return "<environment_context>\n" + "\n".join(lines) + "\n</environment_context>"


def work_dir(rng: random.Random) -> str:
    """An agent's working directory: a short project path, or a test runner's temporary one
    (``/tmp/pytest-of-root/pytest-12/test_add_a_file0/work``), long and full of digits."""
    parts = ("work", "home", "src", "repo", "app", "tmp", "user", "projects", "workspace")
    if rng.random() < 0.5:
        return "/" + "/".join(rng.choice(parts) for _ in range(rng.choice((1, 2, 2, 3, 4))))
    words = [w for name in DECOY_NAMES + PARAM_NAMES for w in name.split("_")]
    test = "test_" + "_".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
    test += rng.choice(("0", "1", "_t0", "_t1", ""))
    user = rng.choice(("root", "runner", "user"))
    return f"/tmp/pytest-of-{user}/pytest-{rng.randint(0, 999)}/{test}/{rng.choice(parts)}"


def _param(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(PARAM_TYPES)
    schema: dict[str, Any] = {"type": kind}
    if kind == "array":
        schema["items"] = {"type": "string"}
    if rng.random() < 0.7:
        schema["description"] = prose(rng, rng.randint(4, 25)).replace("\n", " ")
    return schema


def decoy_tools(rng: random.Random, n: int, taken: set[str]) -> list[dict[str, Any]]:
    """``n`` agent-style tools (long descriptions, several typed parameters) to be left alone."""
    tools: list[dict[str, Any]] = []
    names = [name for name in DECOY_NAMES if name not in taken]
    rng.shuffle(names)
    for name in names[:n]:
        keys = rng.sample(PARAM_NAMES, rng.randint(1, 4))
        params: dict[str, Any] = {
            "type": "object",
            "properties": {k: _param(rng) for k in keys},
            "required": keys[: rng.randint(0, len(keys))],
        }
        if rng.random() < 0.5:
            params["additionalProperties"] = False
        function = {
            "name": name,
            "description": prose(rng, rng.randint(10, 120)),
            "parameters": params,
        }
        tools.append({"type": "function", "function": function})
    return tools


def file_name(rng: random.Random, word: str) -> str:
    """A file name around a word: ``word.txt``, ``src/word.py``."""
    name = f"{word}.{rng.choice(EXTENSIONS)}"
    if rng.random() < 0.2:
        name = rng.choice(("src", "docs", "notes", "tests")) + "/" + name
    return name


def patch_input(name: str, content: str) -> str:
    """The patch that adds file ``name`` holding one line, ``content`` (Codex's grammar)."""
    return f"*** Begin Patch\n*** Add File: {name}\n+{content}\n*** End Patch\n"
