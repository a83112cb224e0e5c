"""Writes the generated docs: the flags and environment variables (docs/reference/flags.md),
and the gRPC status-code table of docs/api/grpc.md (a region between two markers).

Run `python -m tools.gen_docs` after changing a flag in `service/flags.py` or a row of an error
table (`service/errors.py`, `http_facade/kit/errors.py`); a test and `mkdocs build --strict`
(the hook tools/mkdocs_hooks.py) fail while the committed text is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from mlx_responses.http_facade.kit.errors import REASON_TABLE
from mlx_responses.service.errors import GRPC_TABLE
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


def render_grpc_status_table() -> str:
    """Every refusal reason: its gRPC status, the façade's HTTP answer and the OpenAI codes."""
    lines = [
        "| `ErrorInfo.reason` | gRPC status (code) | HTTP status, `error.type` | `error.code` "
        "(metadata `code`) | `error.code` of a background response that fails so |",
        "|---|---|---|---|---|",
    ]
    for reason, row in GRPC_TABLE.items():
        http = REASON_TABLE[reason.value]
        code = f"`{row.openai_code}`" if row.openai_code else "null, or the raiser's"
        lines.append(
            f"| `{reason.value}` | `{row.code.name}` ({row.rpc_code}) | {http.status}, "
            f"`{http.type}` | {code} | `{row.failure_code}` |"
        )
    return "\n".join(lines)


GENERATED = {FLAGS_PAGE: render_flags_page}
# Regions of hand-written pages: the text between `<!-- generated:NAME -->` and
# `<!-- /generated:NAME -->`.
REGIONS: dict[Path, dict[str, Callable[[], str]]] = {
    Path("api/grpc.md"): {"grpc-status": render_grpc_status_table},
}


def _with_regions(text: str, regions: dict[str, Callable[[], str]]) -> str:
    for name, render in regions.items():
        pattern = re.compile(
            rf"(<!-- generated:{name} -->\n)(?:.*?\n)?(<!-- /generated:{name} -->)", re.DOTALL
        )
        if pattern.search(text) is None:
            raise ValueError(f"no generated:{name} markers")
        body = render()
        text = pattern.sub(lambda m, body=body: m.group(1) + body + "\n" + m.group(2), text)
    return text


def _rendered(docs: Path) -> dict[Path, str]:
    """Each generated page or page with generated regions, as it should read."""
    out = {path: render() for path, render in GENERATED.items()}
    for path, regions in REGIONS.items():
        out[path] = _with_regions((docs / path).read_text(), regions)
    return out


def stale_pages(docs: Path = DOCS) -> list[Path]:
    """The generated pages (relative to `docs`) whose text differs from a fresh rendering."""
    return [
        path
        for path, text in _rendered(docs).items()
        if not (docs / path).exists() or (docs / path).read_text() != text
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
    for path, text in _rendered(DOCS).items():
        (DOCS / path).parent.mkdir(parents=True, exist_ok=True)
        (DOCS / path).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
