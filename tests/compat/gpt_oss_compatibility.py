"""Runs openai/gpt-oss's `compatibility-test` against this server and says why each case fails.

The test (`compatibility-test/` in openai/gpt-oss: the Agents SDK for TypeScript, one tool per
case from its cases.jsonl, through the Responses and Chat Completions APIs) is not published on
npm, so it runs from a checkout of that repository (or of the folder alone), given as the first
argument; its npm dependencies come from the registry (`npm install`, and `tsx` through `npx`,
which its `npm start` expects on PATH). The script serves the tiny gpt-oss
(service/assets/tiny-gpt-oss, or `--model`) on free ports, writes a `mlx` entry into the
checkout's providers.ts (the original is put back afterwards), runs
`tsx index.ts --provider mlx -k K` (`--streaming` too with `--streaming`), and classifies each
case and API from the rollout file the test writes:

  pass   the test passed it;
  model  the API's shape was right, but the model did not do what the case asks: no call of
         the offered tool, arguments that do not fit its parameters or are not JSON, no final
         answer within the test's turns, or no reasoning written at all (the test asks for
         reasoning and a tool call of a model; the tiny one does some);
  test   what the test itself cannot check: a streamed Responses run (its runCase reads the
         SDK's providerData, which the SDK leaves out of streamed runs): stream with --api chat;
  FAIL   anything else: the API's shape (a reasoning item or field missing or malformed where
         the model wrote reasoning, events missing, protocol text `<|` in a response, an HTTP
         error). The exit status is 1 when there is one.

It prints a line per case and API, then the API-shape and tool-choice figures apart.

    .venv/bin/python tests/compat/gpt_oss_compatibility.py ~/src/gpt-oss [-k 1] [--streaming]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.processes import free_port, process, wait_status  # noqa: E402

MODEL = ROOT / "service" / "assets" / "tiny-gpt-oss"
PROVIDER = "mlx"
PROVIDERS_TS = """export const PROVIDERS = {{
  {name}: {{
    apiBaseUrl: "{base_url}",
    apiKey: "unused",
    apiType: {apis},
    modelName: "{model}",
    providerDetails: {{}},
  }},
}};
"""
Outcome = tuple[str, str]  # (pass | model | test | FAIL, why)
# What the test cannot check: its runCase reads `output` from the first raw response's
# providerData, which the Agents SDK leaves out of a streamed Responses run for any server (0.0.15,
# the test's pin, gives no providerData; 0.20.0, the registry's latest in December 2026, gives it
# without `output`, `usage` and `id`), and its testEvents looks for raw_model_stream_event among
# the events it already unwrapped, which never match either.
STREAMED_RESPONSES = "the test cannot check a streamed Responses run (its runCase reads no data)"
# A streamed Chat run where the model wrote no reasoning: the test's testEvents reads
# `choices[0].delta` of every chunk until it finds a reasoning delta, so it throws at the usage
# chunk (`choices: []`, as OpenAI sends it) that Agents SDK 0.20 asks for with include_usage.
NO_STREAMED_REASONING = "no reasoning written (streamed; the test then throws at the usage chunk)"


def folder(checkout: Path) -> Path:
    """The compatibility-test folder of a gpt-oss checkout (or the folder itself)."""
    for candidate in (checkout / "compatibility-test", checkout):
        if (candidate / "cases.jsonl").exists() and (candidate / "runCase.ts").exists():
            return candidate
    raise SystemExit(f"{checkout} holds no compatibility-test (cases.jsonl, runCase.ts)")


# --- classifying ------------------------------------------------------------------------------
def _reasoning_written(api: str, history: Sequence[Any]) -> bool:
    """Whether the responses the test reads carry reasoning in some form (right or wrong
    shape): the first one on the Responses API, any one on Chat Completions."""
    for data in history[:1] if api == "responses" else history:
        if not isinstance(data, dict):
            continue
        if api == "responses":
            if any(item.get("type") == "reasoning" for item in data.get("output") or []):
                return True
        else:
            message = ((data.get("choices") or [{}])[0]).get("message") or {}
            if message.get("reasoning") or message.get("reasoning_content"):
                return True
    return False


def shape(result: dict[str, Any]) -> Outcome:
    """The API-shape half of one case: what the test checks of the responses and events."""
    api, history = result["apiType"], result.get("history") or []
    if "<|" in json.dumps(history, ensure_ascii=False):
        return "FAIL", "protocol text '<|' in a response"
    if result.get("validEvents") is False:
        # Chat's check: some `delta.reasoning`. The server streams the reasoning the model
        # writes (seeded runs: the deltas equal the whole response's `reasoning`, and both are
        # empty in the runs where the sampled model writes no analysis).
        if api == "chat" and (result.get("details") or {}).get("hasReasoningDeltas") is False:
            return "model", "no reasoning written (streamed)"
        return "FAIL", f"events: {result.get('details')}"
    if result.get("validResponse"):
        return "pass", ""
    if not _reasoning_written(api, history):
        return "model", "no reasoning written"
    return "FAIL", f"reasoning in the wrong shape: {result.get('details')}"


def tool_choice(result: dict[str, Any], tool: str) -> Outcome:
    """The tool-calling half: the offered tool called with arguments that fit its schema."""
    details = result.get("toolCallingDetails") or {}
    if result.get("successToolCall"):
        right = details.get("calledToolWithRightArguments")
        return "pass", "" if right else "arguments fit the schema, not the case's values"
    if not details.get("calledToolAtLeastOnce"):
        return "model", f"{tool} not called"
    return "model", "arguments do not fit the tool's parameters"


def classify(record: dict[str, Any]) -> tuple[str, Outcome, Outcome]:
    """(api, shape outcome, tool-choice outcome) of one rollout record."""
    if "error" in record:  # the run threw: no summary
        error = record["error"]
        if "Max turns" in error:
            return "?", ("pass", ""), ("model", "no final answer within the turns")
        if "JSON" in error and "status" not in error.lower():
            return "?", ("pass", ""), ("model", f"arguments are not JSON: {error[:120]}")
        if "reading 'output'" in error:
            return "?", ("test", STREAMED_RESPONSES), ("test", STREAMED_RESPONSES)
        if "reading 'delta'" in error:
            return "chat", ("model", NO_STREAMED_REASONING), ("test", NO_STREAMED_REASONING)
        return "?", ("FAIL", error[:300]), ("FAIL", error[:300])
    result = record["result"]
    return result["apiType"], shape(result), tool_choice(result, record["tool_name"])


# --- running ------------------------------------------------------------------------------------
@contextlib.contextmanager
def provider(test: Path, base_url: str, model: str, apis: Sequence[str]) -> Iterator[None]:
    """The checkout's providers.ts holding our entry, put back as it was afterwards."""
    path = test / "providers.ts"
    original = path.read_text()
    entry = PROVIDERS_TS.format(
        name=PROVIDER, base_url=base_url, model=model, apis=json.dumps(list(apis))
    )
    path.write_text(entry)
    try:
        yield
    finally:
        path.write_text(original)


def run_test(test: Path, tries: int, streaming: bool, limit: int | None) -> list[dict[str, Any]]:
    """The test's rollout records (its rollout_mlx_*.jsonl), installing its dependencies once."""
    if not (test / "node_modules").exists():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=test, check=True)
    before = set(test.glob(f"rollout_{PROVIDER}_*.jsonl"))
    command = ["npx", "--yes", "tsx", "index.ts", "--provider", PROVIDER, "-k", str(tries)]
    if streaming:
        command.append("--streaming")
    if limit:
        command += ["-n", str(limit)]
    done = subprocess.run(command, cwd=test, capture_output=True, text=True, check=False)
    written = sorted(set(test.glob(f"rollout_{PROVIDER}_*.jsonl")) - before)
    if not written:
        raise RuntimeError(f"the test wrote no rollout:\n{done.stdout[-3000:]}\n{done.stderr}")
    return [json.loads(line) for line in written[-1].read_text().splitlines() if line.strip()]


def report(records: Sequence[dict[str, Any]]) -> int:
    """Prints a line per case and API, then the figures; the number of real failures."""
    counts: dict[str, dict[str, int]] = {"shape": {}, "tool": {}, "case": {}}
    failures = 0
    for record in sorted(records, key=lambda r: (r.get("test_case", 0), str(r.get("run_id")))):
        api, api_shape, choice = classify(record)
        outcomes = (api_shape[0], choice[0])
        overall = next((o for o in ("FAIL", "test", "model") if o in outcomes), "pass")
        failures += overall == "FAIL"
        for key, outcome in (("shape", api_shape[0]), ("tool", choice[0]), ("case", overall)):
            counts[key][outcome] = counts[key].get(outcome, 0) + 1
        why = "; ".join(w for _, w in (api_shape, choice) if w)
        case = f"{record.get('test_case')!s:>3} {record.get('tool_name')!s:<18}"
        print(f"{case} {api:<9} {overall:<5} {why}")

    def line(key: str) -> str:
        got = counts[key]
        return ", ".join(f"{got.get(o, 0)} {o}" for o in ("pass", "model", "test", "FAIL"))

    print(f"\n{len(records)} runs (case x API x try)")
    print(f"  API shape:   {line('shape')}")
    print(f"  tool choice: {line('tool')}")
    print(f"  whole case:  {line('case')}")
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of openai/gpt-oss")
    parser.add_argument("--model", type=Path, default=MODEL, help="the model folder to serve")
    parser.add_argument("-k", "--tries", type=int, default=1, help="runs of each case")
    parser.add_argument("-n", "--limit", type=int, help="only the first N cases")
    parser.add_argument("--streaming", action="store_true", help="the streamed runs")
    parser.add_argument(
        "--api",
        choices=("both", "responses", "chat"),
        default="both",
        help="which of the test's providers (streamed, only chat can be checked: see above)",
    )
    parser.add_argument("--json-out", type=Path, help="also write the rollout records here")
    args = parser.parse_args(argv)
    if shutil.which("npx") is None:
        parser.error("npx (Node.js) is needed")
    test = folder(args.checkout)
    port = free_port()
    logs = Path(tempfile.mkdtemp(prefix="gpt-oss-compat-"))
    serve = ["serve", "--model", str(args.model), "--port", str(port)]
    serve += ["--grpc-port", str(free_port()), "--prompt-cache-dir", str(logs / "cache")]
    with process(*serve) as server:
        wait_status(port, 200, server, timeout=120)
        base_url = f"http://127.0.0.1:{port}/v1"
        apis = ("responses", "chat") if args.api == "both" else (args.api,)
        with provider(test, base_url, args.model.name, apis):
            records = run_test(test, args.tries, args.streaming, args.limit)
    if args.json_out:
        args.json_out.write_text(json.dumps(records, indent=2, ensure_ascii=False))
    return 1 if report(records) else 0


if __name__ == "__main__":
    sys.exit(main())
