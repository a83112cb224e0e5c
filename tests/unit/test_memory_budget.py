"""The memory budget's sums: what never fits, what must wait, what the prompt cache may keep."""

from __future__ import annotations

import argparse
import re

import pytest
from mlx_responses.service import flags as F
from mlx_responses.service.engine.memory.budget import MemoryBudget, MemoryLimitError
from mlx_responses.service.engine.memory.device import device_memory, resolve_limit
from mlx_responses.service.engine.memory.kv_layout import Activations, KVLayout

MIB = 1 << 20
# 4 KiB of KV a token: 8 layers x (K, V) x 2 heads x 32 x float32.
LAYOUT = KVLayout(layers=8, kv_heads=2, head_dim=32, dtype_bytes=4)


def _budget(limit: int | None = 100 * MIB) -> MemoryBudget:
    return MemoryBudget(limit, measure_runtime=lambda: 20 * MIB)


def test_the_layout_is_4_kib_a_token() -> None:
    assert LAYOUT.bytes_per_token == 4096


def test_a_request_that_can_never_fit_names_its_size_and_the_budget() -> None:
    account = _budget().open("m", LAYOUT, context=65536, weights=10 * MIB)
    # 100 MiB less 20 of runtime and 10 of weights leaves 70 MiB: 15,928 tokens (4 KiB each,
    # and 1/8 more while a layer's cache is copied).
    account.check(prompt=14_000, max_output=1_000)
    with pytest.raises(MemoryLimitError) as refused:
        account.check(prompt=14_000, max_output=4_000)
    assert refused.value.param == "max_output_tokens"  # the prompt alone would fit
    message = str(refused.value)
    assert "18,000 tokens" in message and "100.0 MiB" in message and "70.0 MiB" in message
    with pytest.raises(MemoryLimitError) as refused:
        account.check(prompt=20_000, max_output=1)
    assert refused.value.param == "input"


def _figures(text: str) -> list[float]:
    return [float(f.replace(",", "")) for f in re.findall(r"([\d,]+\.\d) MiB", text)]


def test_the_refusal_names_every_part_and_its_figures_add_up() -> None:
    """KV (rounded to the cache's steps), a layer's copy as it grows and a prefill step's
    activations make up the need; the room is the limit less the weights and the runtime."""
    account = _budget().open("m", LAYOUT, context=65536, weights=10 * MIB)
    account.activations = Activations(
        rows=1, step=512, heads=4, hidden=512, intermediate=2048, dtype_bytes=4, scores=True
    )
    with pytest.raises(MemoryLimitError) as refused:
        account.check(prompt=6_086, max_output=10_000)
    message = str(refused.value)
    need, kv, copy, activations, room, limit, weights, runtime = _figures(message)
    assert "of KV cache" in message and "of activations for a prefill step" in message
    assert "while a layer's cache is copied" in message
    assert abs(need - (kv + copy + activations)) <= 0.1
    assert abs(room - (limit - weights - runtime)) <= 0.1
    assert kv == round(LAYOUT.bytes_for(16_086) / MIB, 1)  # 16,128 tokens at 4,096 bytes
    assert copy == round(LAYOUT.bytes_for(16_086) / 8 / MIB, 1)  # one layer of 8


def test_a_limit_below_the_weights_is_refused_with_the_figure() -> None:
    account = _budget(25 * MIB).open("m", LAYOUT, context=65536, weights=10 * MIB)
    with pytest.raises(MemoryLimitError) as refused:
        account.check_room()
    message = str(refused.value)
    assert "--memory-limit 25.0 MiB is too small for the model m" in message
    assert "weights take 10.0 MiB and the runtime 20.0 MiB" in message
    # 30 MiB and one 256-token step of 4 KiB tokens (1 MiB, and 1/8 more as it is copied).
    assert "at least 32 MiB" in message
    _budget(32 * MIB).open("m", LAYOUT, context=65536, weights=10 * MIB).check_room()


def test_the_context_window_bounds_the_reservation() -> None:
    account = _budget().open("m", LAYOUT, context=4096, weights=10 * MIB)
    account.check(prompt=4000, max_output=1_000_000)  # at most the window: 16 MiB
    assert account.reservation(4000, 1_000_000) == 4096


def test_no_limit_admits_everything() -> None:
    account = _budget(None).open("m", LAYOUT, context=1 << 20, weights=10 * MIB)
    account.check(prompt=1 << 20, max_output=1)
    assert account.shortfall(1 << 20) == 0
    assert account.cache_room() is None


def test_live_sequences_are_a_rectangle_and_leave_room_when_released() -> None:
    account = _budget().open("m", LAYOUT, context=65536, weights=10 * MIB)
    # 70 MiB for KV: three sequences of 4,096 tokens (16 MiB each, and 1/8 of all of them
    # while a layer's cache is copied) fit, a fourth does not.
    for uid in range(3):
        assert account.shortfall(4096) == 0
        account.admit(uid, 4096)
    assert account.shortfall(4096) == 2 * MIB  # 20 + 10 + 4 x 16 x 9/8 = 102
    account.release(0)
    assert account.shortfall(4096) == 0
    # A short sequence beside long ones is held as long as they (one padded rectangle).
    assert account.live_bytes(256) == 3 * 18 * MIB


def test_the_prompt_cache_counts_and_gets_what_is_left() -> None:
    account = _budget().open("m", LAYOUT, context=65536, weights=10 * MIB)
    account.admit(1, 4096)
    assert account.cache_room() == 100 * MIB - 20 * MIB - 10 * MIB - 18 * MIB
    account.prompt_cache = 50 * MIB
    assert account.shortfall(4096) == 16 * MIB  # the cache must give 16 MiB back first
    assert account.held() == {
        "weights": 10 * MIB,
        "kv": 18 * MIB,  # as reserved: 16 MiB, and a layer's copy
        "prompt_cache": 50 * MIB,
        "image_cache": 0,
    }


def test_the_image_encodings_count_beside_the_prompt_cache() -> None:
    """A vision model's image-encoding cache is in its account: its shortfall, the other
    models' room and the metrics' kinds."""
    budget = _budget()
    account = budget.open("m", LAYOUT, context=65536, weights=10 * MIB)
    other = budget.open("o", LAYOUT, context=65536, weights=0)
    account.admit(1, 4096)
    account.prompt_cache, account.image_cache = 30 * MIB, 20 * MIB
    assert account.shortfall(4096) == 16 * MIB  # 20 + 10 + 2 x 18 + 30 + 20 = 116
    assert other.cache_room() == 100 * MIB - 20 * MIB - 10 * MIB - 18 * MIB - 50 * MIB
    assert account.held()["image_cache"] == 20 * MIB
    assert budget.by_model()["m"]["image_cache"] == 20 * MIB


def test_other_models_count_and_leave_with_their_account() -> None:
    budget = _budget()
    first = budget.open("a", LAYOUT, context=65536, weights=10 * MIB)
    second = budget.open("b", LAYOUT, context=65536, weights=30 * MIB)
    assert first.cache_room() == 100 * MIB - 20 * MIB - 40 * MIB
    second.close()
    assert first.cache_room() == 70 * MIB
    assert set(budget.by_model()) == {"a"}


def test_the_runtime_is_measured_once() -> None:
    calls: list[int] = []
    budget = MemoryBudget(100 * MIB, measure_runtime=lambda: calls.append(1) or 5 * MIB)
    budget.open("a", LAYOUT, context=1, weights=0)
    budget.open("b", LAYOUT, context=1, weights=0)
    assert calls == [1] and budget.runtime == 5 * MIB


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8589934592", 8589934592),
        ("8G", 8 << 30),
        ("768M", 768 << 20),
        ("768MiB", 768 << 20),
        ("1.5g", 1.5 * (1 << 30)),
        ("512k", 512 << 10),
        ("0.75", 0.75),
    ],
)
def test_memory_sizes(text: str, value: float) -> None:
    assert F.memory_size(text) == value


@pytest.mark.parametrize(
    "text", ["", "lots", "-1G", "0", "1.5", "8X", "inf", "1e400", "nan", "NaNG", "1e308T", "-inf"]
)
def test_bad_memory_sizes(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        F.memory_size(text)


def test_a_fraction_is_of_the_device_memory() -> None:
    assert resolve_limit(0.5) == int(0.5 * device_memory())
    assert resolve_limit(768 << 20) == 768 << 20
    assert resolve_limit(None) is None  # no default on a CPU


@pytest.mark.parametrize("limit", [16, 64])
def test_slot_rows_follow_the_slots_store(limit: int) -> None:
    from mlx_responses.service.engine.memory.budget import slot_rows
    from mlx_responses.service.engine.slots.store import Store

    store = Store(limit)
    assert [slot_rows(n, limit) for n in range(1, limit + 1)] == [
        store._rows(n) for n in range(1, limit + 1)
    ]


def test_the_fixed_slots_hold_rows_in_steps() -> None:
    account = _budget(1 << 40).open("m", LAYOUT, context=65536, weights=0)
    account.slots, account.max_rows = True, 16
    one = LAYOUT.bytes_for(4096)
    # A layer's copy beside them (1/8: 8 layers).
    assert account.bytes_of([4096] * 3) == 4 * one * 9 // 8  # 4 rows for 3
    assert account.bytes_of([4096] * 9) == 16 * one * 9 // 8  # 16 for 9
    account.scheduler_bytes = 20 * one  # what the scheduler reports is a floor
    assert account.bytes_of([4096]) == 20 * one * 9 // 8
