"""Runs the Open Responses compliance suite against this server and says why each case fails.

The suite (openresponses/openresponses: `bin/compliance-test.ts` over
`src/lib/compliance-tests.ts` and the zod schemas kubb generated from its OpenAPI document) is
not published on npm, so it runs from a copy of that repository, given as the first argument
or as $OPENRESPONSES_SUITE (without one the script says so and exits 0: it is not part of
CI). Its one runtime dependency, zod, comes from the npm registry (`npm pack`, into the copy's
node_modules/) and so does bun (the `bun` package, under build/bun/, unless bun is on PATH).

For each model (by default the tiny gpt-oss, service/assets/tiny-gpt-oss, and the bundled
model) the script serves it on free ports, runs the suite twice, as it is and through
tests/compat/background_shim.py (which adds `"background": false` to every response object:
the suite checks a response's schema first, so a case failing on the seed's missing key says
nothing of the rest), and prints one line per case:

  pass   the suite passed it;
  seed   it fails only where the seed (the spec this server implements) decides otherwise: the
         seed's sentence is quoted;
  model  it asks what the model served cannot do (read an image, call a tool it is not told
         to call, stop repeating itself): the reason and what the model answered;
  FAIL   anything else: a real failure. The exit status is 1 when there is one.

    .venv/bin/python tests/compat/open_responses_compliance.py PATH/TO/openresponses
        [--model gpt-oss|bundled|FOLDER ...] [--filter id,...] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.compat.background_shim import shimmed  # noqa: E402
from tests.support.processes import free_port, process, wait_status  # noqa: E402

SUITE_SCRIPT = "bin/compliance-test.ts"
BUN_PREFIX = ROOT / "build" / "bun"
MODELS = {"gpt-oss": ROOT / "service" / "assets" / "tiny-gpt-oss", "bundled": None}
API_KEY = "sk-local"  # the suite insists on one; the server is started without keys

# What a `seed` or `model` label stands for: the seed's sentence, or the model's limit.
LEGEND = {
    "background": 'seed: "Every object of a background response carries "background": true; '
    'a foreground response has no such key." (the suite requires the key)',
    "reasoning_text events": 'seed: "Function-call arguments and reasoning traces use the '
    'matching response.function_call_arguments.* and response.reasoning_text.* events." '
    "(Open Responses names them response.reasoning.*, with the same payloads)",
    "compaction": 'seed: "A history longer than one context window, a summary that does not '
    "fit, or a summary that does not shorten the context returns 400 with code "
    'context_length_exceeded and changes nothing." (the case compacts two short messages)',
    "no images": "model: a text model refuses input_image (400); a vision model passes",
    "no tool call": "model: the tiny models call a tool when the prompt tells them to",
    "repeats itself": "model: it ran to max_output_tokens (status incomplete)",
}
Outcome = tuple[str, str]  # (pass | seed | model | FAIL, why)
RANK = {"pass": 0, "seed": 1, "model": 2, "FAIL": 3}


# --- reading the suite's errors -------------------------------------------------------------
def _branch(issues: Sequence[dict[str, Any]]) -> list[str]:
    """The leaf issues of a zod result, following in each union the branch whose `type` the
    event matched; `<no schema>` when none did (an event type the schema does not know)."""
    leaves: list[str] = []
    for issue in issues:
        if issue.get("code") == "invalid_union":
            branches = [u.get("issues", []) for u in issue.get("unionErrors", [])]
            typed = [b for b in branches if not any(i.get("path") == ["type"] for i in b)]
            leaves += _branch(min(typed, key=len)) if typed else ["<no schema>"]
        else:
            leaves.append(".".join(map(str, issue.get("path", []))) + ": " + issue["message"])
    return leaves


def leaves(error: str) -> list[str]:
    """One suite error as its leaf problems (event validation errors are zod issue dumps)."""
    error = re.sub(r"^Turn \d+: ", "", error)
    found = re.match(r"Event validation failed for (\S+): (\[.*\])$", error, re.S)
    if not found:
        return [error]
    try:
        issues = json.loads(found.group(2))
    except ValueError:
        return [error]
    return [f"event {found.group(1)}: {leaf}" for leaf in _branch(issues)]


def _answered(response: Any) -> str:
    """What the model wrote in the (last) response a case kept, for the report."""
    last = response[-1] if isinstance(response, list) and response else response
    if not isinstance(last, dict):
        return ""
    texts = [
        part.get("text", "")
        for item in last.get("output") or []
        for part in item.get("content") or []
        if isinstance(part, dict)
    ]
    return " | ".join(t for t in texts if t)[:80]


def leaf_outcome(leaf: str, response: Any) -> Outcome:
    """What one problem means here."""
    body = json.dumps(response) if not isinstance(response, str) else response
    if re.match(r"(event \S+: )?(response\.)?background: ", leaf):
        return "seed", "background"
    if re.match(r"event response\.reasoning_text\.(delta|done): <no schema>", leaf):
        return "seed", "reasoning_text events"
    if leaf.startswith("HTTP 400") and "context_length_exceeded" in leaf + body:
        return "seed", "compaction"
    if leaf.startswith("HTTP 400") and re.search(r"input_image|unsupported_content", body):
        return "model", "no images"
    answered = _answered(response)
    if leaf.startswith('Expected output item of type "function_call"'):
        return "model", f"no tool call (answered {answered!r})"
    if 'but got "incomplete"' in leaf and "max_output_tokens" in body:
        return "model", f"repeats itself (answered {answered[:24]!r}...)"
    return "FAIL", leaf[:300]


def classify(result: dict[str, Any]) -> Outcome:
    """One case's result: the worst of what its problems mean (any unknown one: FAIL)."""
    status = result.get("status")
    if status in ("passed", "skipped"):
        return ("pass" if status == "passed" else "skipped"), ""
    problems = [leaf for error in result.get("errors") or [] for leaf in leaves(error)]
    if not problems:
        return "FAIL", "failed without errors"
    outcomes = {leaf_outcome(leaf, result.get("response")) for leaf in problems}
    worst = max(RANK[o] for o, _ in outcomes)
    return next(o for o in outcomes if RANK[o[0]] == worst)[0], "; ".join(
        sorted({why for o, why in outcomes if RANK[o] >= 1})
    )


def combine(plain: dict[str, Any], shimmed_result: dict[str, Any] | None) -> Outcome:
    """The case as run, and (where its schema failed on `background`) as run with the key."""
    outcome, why = classify(plain)
    if shimmed_result is None or "background" not in why.split("; "):
        return outcome, why
    behind, behind_why = classify(shimmed_result)
    if behind in ("pass", "skipped"):
        return outcome, why
    worst = max((outcome, behind), key=lambda o: RANK.get(o, 0))
    return worst, f"{why}; with the key: {behind_why}"


# --- running it -----------------------------------------------------------------------------
def bun() -> str:
    """The bun binary: on PATH, or from the npm registry's `bun` package under build/bun/."""
    found = shutil.which("bun") or str(BUN_PREFIX / "node_modules" / ".bin" / "bun")
    if Path(found).exists():
        return found
    BUN_PREFIX.mkdir(parents=True, exist_ok=True)
    command = ["npm", "install", "--prefix", str(BUN_PREFIX), "--no-audit", "--no-fund", "bun@1"]
    subprocess.run(command, check=True)
    return str(BUN_PREFIX / "node_modules" / ".bin" / "bun")


def ensure_zod(checkout: Path) -> None:
    """The suite's one runtime dependency, from the npm registry, at the copy's version."""
    target = checkout / "node_modules" / "zod"
    if (target / "package.json").exists():
        return
    spec = json.loads((checkout / "package.json").read_text())["dependencies"]["zod"]
    with tempfile.TemporaryDirectory() as scratch:
        command = ["npm", "pack", f"zod@{spec}", "--pack-destination", scratch]
        name = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        with tarfile.open(Path(scratch) / name.strip().splitlines()[-1]) as archive:
            target.mkdir(parents=True, exist_ok=True)
            for member in archive.getmembers():
                member.name = member.name.split("/", 1)[-1]
                archive.extract(member, target, filter="data")


def run_suite(checkout: Path, base_url: str, model: str, only: str) -> dict[str, dict[str, Any]]:
    """The suite's results (its `--json` output) by case id."""
    command = [bun(), "run", SUITE_SCRIPT, "--base-url", base_url, "--api-key", API_KEY]
    command += ["--model", model, "--json"] + (["--filter", only] if only else [])
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    start = done.stdout.find("{")
    if start < 0:
        raise RuntimeError(f"the suite printed no JSON:\n{done.stdout}\n{done.stderr}")
    return {r["id"]: r for r in json.loads(done.stdout[start:])["results"]}


def against(checkout: Path, folder: Path | None, only: str) -> dict[str, Any]:
    """Serves one model and runs the suite as it is and through the background shim."""
    port = free_port()
    logs = Path(tempfile.mkdtemp(prefix="open-responses-"))
    serve = ["serve", "--port", str(port), "--grpc-port", str(free_port())]
    serve += ["--prompt-cache-dir", str(logs / "cache")]
    serve += ["--model", str(folder)] if folder is not None else []
    with process(*serve) as server:
        wait_status(port, 200, server, timeout=180)
        origin = f"http://127.0.0.1:{port}"
        model = httpx.get(f"{origin}/v1/models", timeout=10).json()["data"][0]["id"]
        plain = run_suite(checkout, f"{origin}/v1", model, only)
        with shimmed(origin, free_port()) as shim:
            with_key = run_suite(checkout, f"{shim}/v1", model, only)
    return {"model": model, "plain": plain, "shimmed": with_key}


def report(model: str, plain: dict[str, Any], with_key: dict[str, Any]) -> int:
    """Prints one line per case; the number of real failures."""
    outcomes = {case: combine(result, with_key.get(case)) for case, result in plain.items()}
    width = max((len(case) for case in outcomes), default=10)
    print(f"\n== {model}")
    for case, (outcome, why) in sorted(outcomes.items(), key=lambda kv: kv[0]):
        print(f"{case:<{width}}  {outcome:<7}  {why}")
    counts = {o: sum(v[0] == o for v in outcomes.values()) for o in RANK}
    print(
        f"{len(outcomes)} cases: {counts['pass']} pass, {counts['seed']} as the seed decides, "
        f"{counts['model']} beyond the model, {counts['FAIL']} failed"
    )
    said = " ".join(why for _, why in outcomes.values())
    for label, meaning in LEGEND.items():
        if label in said:
            print(f"  {label}: {meaning}")
    return counts["FAIL"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "checkout",
        nargs="?",
        type=Path,
        default=os.environ.get("OPENRESPONSES_SUITE"),
        help="a copy of openresponses/openresponses (default: $OPENRESPONSES_SUITE)",
    )
    parser.add_argument(
        "--model",
        action="append",
        help="gpt-oss, bundled or a model folder (repeatable; default: gpt-oss and bundled)",
    )
    parser.add_argument("--filter", default="", help="case ids, comma-separated")
    parser.add_argument("--json-out", type=Path, help="also write the suite's results here")
    args = parser.parse_args(argv)
    if args.checkout is None or not (Path(args.checkout) / SUITE_SCRIPT).exists():
        print(
            f"skipped: no copy of openresponses/openresponses (a folder holding {SUITE_SCRIPT}) "
            "given or in $OPENRESPONSES_SUITE; see docs/development.md"
        )
        return 0
    checkout = Path(args.checkout).resolve()
    ensure_zod(checkout)
    failures, runs = 0, []
    for name in args.model or list(MODELS):
        folder = MODELS[name] if name in MODELS else Path(name)
        run = against(checkout, folder, args.filter)
        runs.append(run)
        failures += report(run["model"], run["plain"], run["shimmed"])
    if args.json_out:
        args.json_out.write_text(json.dumps(runs, indent=2, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
