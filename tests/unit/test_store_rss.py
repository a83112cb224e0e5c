"""10,000 stored responses leave the process RSS within the store's byte budget + 10%."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlx_responses.service.stores.base import ENTRY_OVERHEAD_BYTES

ROOT = Path(__file__).resolve().parents[2]
COUNT = 10_000
# A third of what 10,000 responses of ~2.5 kB serialize to: eviction must do the bounding.
BUDGET = 8 * 1024 * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS (Linux)")
def test_rss_of_10k_stored_responses_stays_within_the_budget() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.store_rss", str(COUNT), str(BUDGET), "120"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    figures = json.loads(done.stdout)
    print(f"store rss: {figures}")
    assert figures["serialized_put"] > 2.5 * BUDGET, "the check needs eviction to matter"
    assert figures["entries_kept"] < COUNT
    assert figures["bytes_kept"] <= BUDGET
    assert figures["rss_growth"] <= 1.1 * BUDGET, figures
    # The accounting is honest both ways: most of the budget holds response bytes.
    per_entry = figures["serialized_put"] / COUNT - ENTRY_OVERHEAD_BYTES
    assert figures["entries_kept"] * per_entry >= 0.6 * BUDGET, figures
