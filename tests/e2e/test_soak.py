"""The soak's 2-minute version (tests/support/soak.py; the 30-minute one is
tests/benchmarks/soak.py): a real `serve` under mixed APIs, streams, dropped streams,
background responses polled and cancelled, a side model unloaded by keep_alive and reloaded,
and a small disk tier filled past its bound."""

from __future__ import annotations

import pytest

from tests.support.soak import Options, run

pytestmark = pytest.mark.e2e


def test_a_two_minute_soak_answers_every_request_and_holds_flat() -> None:
    # 100 s of traffic (bursts to the side model at 0 s and 60 s: its load falls in the
    # middle third of the samples after the warm-up), the first 30 s left out of "flat", the
    # prompt cache's memory tier small enough to be full by then; with the process's start
    # and the build of the models, ~2 minutes in all.
    options = Options(minutes=100 / 60, workers=4, disk_mib=4, warm_up=0.5, cache_entries=8)
    result = run(options)
    print("\n".join(result.lines()))
    assert result.failures() == []
