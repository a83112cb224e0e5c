"""A soak of a real `serve` process (tests/support/soak.py says what it drives and checks):
mixed APIs for `--minutes`, then no 5xx, no stuck request, and RSS and open files flat within
10% after `--warm-up` minutes (medians of the first and last thirds of the samples after it).
Prints every request's outcome by kind, the side model's unloads and loads, RSS and open
files, the core's byte gauges and RSS by 5-minute window. Exits 1 when a check fails. The
suite runs a 2-minute version (tests/e2e/test_soak.py). Not a test.

    .venv/bin/python tests/benchmarks/soak.py [--minutes 30] [--workers 6] [--disk-mib 16]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.soak import Options, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    defaults = Options()
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--disk-mib", type=int, default=defaults.disk_mib, help="disk tier bound")
    parser.add_argument("--timeout", type=float, default=defaults.timeout, help="stuck after")
    parser.add_argument("--stored", type=int, default=defaults.stored, help="store's entries")
    parser.add_argument("--warm-up", type=float, default=defaults.warm_up, help="minutes")
    args = parser.parse_args()
    result = run(Options(**vars(args)))
    for line in result.lines():
        print(line)
    failures = result.failures()
    for line in failures:
        print(f"FAILED {line}")
    print(json.dumps({"ok": not failures}))
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
