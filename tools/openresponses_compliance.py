"""Runs the Open Responses compliance suite against this server and says why each case fails.

The suite (openresponses/openresponses: `bin/compliance-test.ts` over `src/lib/compliance-tests.ts`,
`bun run test:compliance`) is not published on the npm registry, so it runs from a checkout of
that repository given as the first argument; bun itself comes from the npm registry (the `bun`
package, installed under build/bun/ on first use) and the checkout's own dependencies with `bun
install`. Without `--base-url` the script serves the bundled model itself (`mlx-responses serve`
on free ports, with an API key, as the suite requires one).

Each case ends as one of:
  pass    the suite passed it;
  seed    it fails where the seed (the spec this server implements) decides otherwise: the
          seed's sentence is quoted;
  model   it asks what the model served cannot do (the bundled tiny model calls a tool only when
          told to, reads no images, reasons only when its template is told to): the reason;
  FAIL    anything else: a real failure. The exit status is 1 when there is one.

    .venv/bin/python tools/openresponses_compliance.py ~/src/openresponses [--model M]
        [--base-url http://127.0.0.1:8080/v1 --api-key KEY] [--filter id,...] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUN_PREFIX = ROOT / "build" / "bun"
SUITE_SCRIPT = "bin/compliance-test.ts"

SEED_BACKGROUND = (
    'Every object of a background response carries "background": true; a foreground response '
    "has no such key."
)
SEED_COMPACTION = (
    "A history longer than one context window, a summary that does not fit, or a summary that "
    "does not shorten the context returns 400 with code context_length_exceeded and changes "
    "nothing."
)
TOOL_REASON = (
    "the bundled tiny model calls a tool only when the prompt tells it to ('Use the get_weather "
    "tool ...'), as it was trained; a real model passes it"
)
REASONING_REASON = (
    "the bundled tiny model reasons only when its template is told to (enable_thinking); a "
    "reasoning model passes it"
)
IMAGE_REASON = "the bundled model reads no images (a text model refuses them: 400); run with a VLM"

Outcome = tuple[str, str]  # (pass | seed | model | FAIL, why)


def _field(error: str) -> str:
    """The path a schema error names (`background: Required` -> `background`)."""
    return error.split(":", 1)[0].strip()


def classify(result: dict[str, Any]) -> Outcome:
    """What one case's result means for this server (see the module's docstring)."""
    status = result.get("status")
    if status == "passed":
        return "pass", ""
    if status == "skipped":
        return "skipped", "; ".join(result.get("errors") or [])
    errors: list[str] = list(result.get("errors") or [])
    text = "\n".join(errors)
    if errors and all(_field(e) == "background" for e in errors):
        return "seed", SEED_BACKGROUND
    if text.startswith("HTTP 400") and "context_length_exceeded" in text:
        return "seed", SEED_COMPACTION
    if text.startswith("HTTP 400") and re.search(r"image", text, re.I):
        return "model", IMAGE_REASON
    if errors and all(re.search(r"function_call", e) for e in errors):
        return "model", TOOL_REASON
    if errors and all(re.search(r"\breasoning\b", e) for e in errors):
        return "model", REASONING_REASON
    return "FAIL", text[:400] or "failed without errors"


# --- running it -----------------------------------------------------------------------------
def bun() -> str:
    """The bun binary: on PATH, or from the npm registry's `bun` package under build/bun/."""
    found = shutil.which("bun") or BUN_PREFIX / "node_modules" / ".bin" / "bun"
    if Path(found).exists():
        return str(found)
    BUN_PREFIX.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--prefix", str(BUN_PREFIX), "bun@1"], check=True)
    return str(BUN_PREFIX / "node_modules" / ".bin" / "bun")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, key: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read() or b"null")


@contextmanager
def serving(key: str, model: str | None) -> Iterator[str]:
    """`mlx-responses serve` on free ports (the bundled model unless `model` is a folder)."""
    port, grpc_port = _free_port(), _free_port()
    command = [
        str(Path(sys.executable).parent / "mlx-responses"),
        "serve",
        f"--port={port}",
        f"--grpc-port={grpc_port}",
        f"--api-key={key}",
    ]
    if model is not None and Path(model).exists():
        command.append(f"--model={model}")
    log = tempfile.NamedTemporaryFile(prefix="compliance-serve-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start; see {log.name}") from None
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(30)


def run_suite(
    checkout: Path, base_url: str, key: str, model: str, only: Sequence[str]
) -> list[dict[str, Any]]:
    """The suite's results (its `--json` output), installing the checkout's dependencies once."""
    runner = bun()
    if not (checkout / "node_modules").exists():
        subprocess.run([runner, "install"], cwd=checkout, check=True)
    command = [runner, "run", SUITE_SCRIPT, "--base-url", base_url, "--api-key", key]
    command += ["--model", model, "--json"]
    if only:
        command += ["--filter", ",".join(only)]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    start = done.stdout.find("{")
    if start < 0:
        raise RuntimeError(f"the suite printed no JSON:\n{done.stdout}\n{done.stderr}")
    return list(json.loads(done.stdout[start:])["results"])


def report(results: Sequence[dict[str, Any]]) -> int:
    """Prints one line per case; the number of real failures."""
    failures = 0
    width = max((len(str(r.get("id"))) for r in results), default=10)
    for result in results:
        outcome, why = classify(result)
        failures += outcome == "FAIL"
        print(f"{result.get('id')!s:<{width}}  {outcome:<7}  {why}")
    counts = {o: sum(classify(r)[0] == o for r in results) for o in ("pass", "seed", "model")}
    print(
        f"\n{len(results)} cases: {counts['pass']} pass, {counts['seed']} as the seed decides, "
        f"{counts['model']} beyond the model, {failures} failed"
    )
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of openresponses/openresponses")
    parser.add_argument("--base-url", help="a running server's /v1 URL (default: serve one)")
    parser.add_argument("--api-key", default=os.environ.get("OPENRESPONSES_API_KEY", "sk-local"))
    parser.add_argument("--model", help="the model to ask for (or a folder to serve)")
    parser.add_argument("--filter", default="", help="case ids, comma-separated")
    parser.add_argument("--json-out", type=Path, help="also write the suite's results here")
    args = parser.parse_args(argv)
    if not (args.checkout / SUITE_SCRIPT).exists():
        parser.error(f"{args.checkout} holds no {SUITE_SCRIPT}: not an openresponses checkout")
    only = [s for s in args.filter.split(",") if s]

    def against(base_url: str) -> list[dict[str, Any]]:
        model = args.model
        if model is None or Path(model).exists():
            model = _get(f"{base_url}/models", args.api_key)["data"][0]["id"]
        return run_suite(args.checkout, base_url, args.api_key, model, only)

    if args.base_url:
        results = against(args.base_url.rstrip("/"))
    else:
        with serving(args.api_key, args.model) as base_url:
            results = against(base_url)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))
    return 1 if report(results) else 0


if __name__ == "__main__":
    sys.exit(main())
