"""The prefill flags' defaults follow the device MLX runs on; a value given always wins."""

from __future__ import annotations

import argparse

import pytest
from mlx_responses.service.config import (
    ConfigError,
    Settings,
    add_core_arguments,
    settings_from_args,
)
from mlx_responses.service.flags import (
    CPU_PREFILL_BATCH_SIZE,
    CPU_PREFILL_TOKENS_PER_STEP,
    GPU_PREFILL_TOKENS_PER_STEP,
    MAX_PREFILL_TOKENS_PER_STEP,
    PREFILL_BATCH_SIZE,
    Prefill,
    prefill_for_device,
)


def _parse(argv: list[str]) -> Settings:
    parser = argparse.ArgumentParser()
    add_core_arguments(parser, {})
    return settings_from_args(parser.parse_args(argv), {})


def test_a_gpu_prefills_a_whole_batch_and_8k_tokens_per_step() -> None:
    assert prefill_for_device("gpu", 64) == Prefill(64, GPU_PREFILL_TOKENS_PER_STEP)
    assert prefill_for_device("gpu", 16) == Prefill(16, 8192)


def test_a_cpu_keeps_8_prompts_and_512_tokens_per_step() -> None:
    assert prefill_for_device("cpu", 64) == Prefill(CPU_PREFILL_BATCH_SIZE, 512)
    assert CPU_PREFILL_TOKENS_PER_STEP == 512
    # The batch never exceeds --max-batch-size.
    assert prefill_for_device("cpu", 4) == Prefill(4, 512)


@pytest.mark.parametrize("device", ["gpu", "cpu"])
def test_values_given_win_on_either_device(device: str) -> None:
    assert prefill_for_device(device, 64, 24, 1024) == Prefill(24, 1024)
    assert prefill_for_device(device, 64, batch_size=2).batch_size == 2
    assert prefill_for_device(device, 64, tokens_per_step=300).tokens_per_step == 300
    assert prefill_for_device(device, 16, batch_size=64).batch_size == 16


def test_settings_leave_unset_flags_to_the_device() -> None:
    settings = _parse([])
    assert settings.prefill_batch_size is None
    assert settings.max_prefill_tokens_per_step is None
    given = _parse(["--prefill-batch-size", "64", "--max-prefill-tokens-per-step", "8192"])
    assert (given.prefill_batch_size, given.max_prefill_tokens_per_step) == (64, 8192)
    with pytest.raises(ConfigError, match="--max-prefill-tokens-per-step"):
        _parse(["--max-prefill-tokens-per-step", "0"])


def test_help_and_docs_name_both_devices_defaults() -> None:
    assert "8192 on a GPU" in MAX_PREFILL_TOKENS_PER_STEP.help_text()
    assert "512 on the CPU" in MAX_PREFILL_TOKENS_PER_STEP.help_text()
    assert "--max-batch-size on a GPU" in PREFILL_BATCH_SIZE.help_text()
    assert "8 on the CPU" in PREFILL_BATCH_SIZE.help_text()
