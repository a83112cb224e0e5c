"""Writes the generated docs pages: the flags and environment variables (docs/reference/flags.md).

Run `python -m tools.gen_docs` after changing a flag in `service/flags.py`; a test and
`mkdocs build --strict` (the hook tools/mkdocs_hooks.py) fail while the committed page is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlx_responses.service.flags import COMMANDS, FLAGS, TOP, Flag

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FLAGS_PAGE = Path("reference/flags.md")  # relative to the docs folder


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _commands(spec: Flag[object]) -> str:
    if spec.commands == (TOP,):
        return f"before the command (`{TOP} --flag COMMAND`)"
    if spec.commands == COMMANDS:
        return "all"
    return ", ".join(f"`{c}`" for c in spec.commands)


def _name(spec: Flag[object]) -> str:
    name = f"`{spec.flag}`"
    if spec.choices is not None:
        name += " `{" + ",".join(str(c) for c in spec.choices) + "}`"
    elif spec.metavar is not None:
        name += f" `{spec.metavar}`"
    if spec.action == "append":
        name += " (repeatable)"
    if spec.required:
        name += " (required)"
    return name


def render_flags_page() -> str:
    """The flags page, every row from service/flags.py."""
    lines = [
        "# Flags and environment variables",
        "",
        "<!-- Generated from service/flags.py by `python -m tools.gen_docs`: do not edit. -->",
        "",
        "```",
        "mlx-responses [--log-level L] [--log-format F] serve  [flags]",
        "mlx-responses [--log-level L] [--log-format F] core   [flags]",
        "mlx-responses [--log-level L] [--log-format F] facade --core HOST:PORT [flags]",
        "```",
        "",
        "`serve` runs the gRPC core and the HTTP façade in one process, the façade reaching the "
        "core over a loopback gRPC channel; `core` and `facade` run them apart (several façades "
        "can share one core, and a façade can front several cores: see "
        "[Stores and scale-out](../concepts/scale-out.md)). Everything binds 127.0.0.1 by "
        "default. `mlx-responses COMMAND --help` prints the same help as the table below.",
        "",
        "Where a flag has an environment variable, the variable sets the default and the flag "
        "overrides it (`--api-key` adds the variable's comma-separated keys to the flags' "
        "keys instead).",
        "",
        "## Flags",
        "",
        "| Flag | Commands | Default | Env var | What it does |",
        "|---|---|---|---|---|",
    ]
    for spec in FLAGS:
        if spec.flag is None:
            continue
        env = f"`{spec.env}`" if spec.env else ""
        lines.append(
            f"| {_name(spec)} | {_commands(spec)} | {_cell(spec.default_text)} | {env} "
            f"| {_cell(spec.help)} |"
        )
    lines += [
        "",
        "## Environment variables",
        "",
        "| Variable | Flag | Default | What it does |",
        "|---|---|---|---|",
    ]
    for spec in sorted((s for s in FLAGS if s.env), key=lambda s: str(s.env)):
        flag = f"`{spec.flag}`" if spec.flag else "(none)"
        lines.append(f"| `{spec.env}` | {flag} | {_cell(spec.default_text)} | {_cell(spec.help)} |")
    lines += [
        "",
        "Sampling defaults come from the model folder's `generation_config.json` when it has one "
        "(the bundled model decodes greedily), else OpenAI's `temperature = top_p = 1`.",
        "",
    ]
    return "\n".join(lines)


GENERATED = {FLAGS_PAGE: render_flags_page}


def stale_pages(docs: Path = DOCS) -> list[Path]:
    """The generated pages (relative to `docs`) whose text differs from a fresh rendering."""
    return [
        path
        for path, render in GENERATED.items()
        if not (docs / path).exists() or (docs / path).read_text() != render()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a page is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages()
        for path in stale:
            print(f"{path} is stale: run `python -m tools.gen_docs`", file=sys.stderr)
        return 1 if stale else 0
    for path, render in GENERATED.items():
        (DOCS / path).parent.mkdir(parents=True, exist_ok=True)
        (DOCS / path).write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
