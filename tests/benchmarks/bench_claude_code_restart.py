"""The real Claude Code CLI (its default ~44k-token request) against `serve`, with a restart.

Four sessions in one directory, each a new `claude -p` with its own words: the first cold on a
new --prompt-cache-dir, the second warm from memory on the same server, the third after the
server was restarted, warm from the disk tier, the fourth on the restarted server again.
Prints each session's wall time and the prompt tokens read from the cache, the ratio of the
disk-warm wall time to the memory-warm one (goal ≤ 1.25), the restarted server's first
session against its second (the model warms up as it loads, so its first request pays no
one-time costs: service/engine/warm_up.py), and the machine's load. Needs Claude Code
(`make setup` installs it in .tools/). Not a test.

    .venv/bin/python tests/benchmarks/bench_claude_code_restart.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e.test_claude_code import _claude, _prompt_tokens, _run, _serve

MODEL = Path(__file__).resolve().parents[2] / "service/assets/tiny-chat"


def main() -> None:
    claude = _claude()
    work = Path(tempfile.mkdtemp(prefix="bench-claude-restart-"))
    cache = ["--prompt-cache-dir", str(work / "prompt-cache")]
    rows = []
    plan = [("cold", "Reply with: hello", True), ("warm, memory", "Reply with: hi", False),
            ("warm, disk (restarted)", "Reply with: hey", True),
            ("warm, memory (restarted)", "Reply with: yo", False)]  # fmt: skip
    serving = None
    port = 0
    for name, words, restart in plan:
        if restart:
            if serving is not None:
                serving.close()
            serving = _serve(MODEL, *cache)
            port = next(serving)
        started = time.perf_counter()
        code, [result] = _run(claude, port, work, "--model", MODEL.name, prompt=words)
        wall = time.perf_counter() - started
        usage = result["usage"]
        prompt = _prompt_tokens(usage)
        rows.append((name, wall, usage["cache_read_input_tokens"], prompt, code))
        print(f"{name:24s} wall {wall:6.2f} s  cached {usage['cache_read_input_tokens']:>6,} "
              f"of {prompt:,}  exit {code}", flush=True)  # fmt: skip
    if serving is not None:
        serving.close()
    print(f"disk-warm / memory-warm wall: {rows[2][1] / rows[1][1]:.2f}")
    # The machine's load over the run: wall times on shared cores move with it.
    print("load average (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    # The restarted server's second session: what the first paid beyond the disk read is the
    # process's first request (MLX and the template's one-time costs), not the disk tier.
    print(f"restarted: first / second session wall: {rows[2][1] / rows[3][1]:.2f}")


if __name__ == "__main__":
    main()
