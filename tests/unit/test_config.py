"""Flags, defaults and environment variables of the seed's store controls."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from mlx_responses.service.config import (
    BUNDLED_MODEL,
    STORE_FLAGS,
    ConfigError,
    Settings,
    add_core_arguments,
    settings_from_args,
)
from mlx_responses.service.flags import KEEP_ALIVE_PATTERN, KEEP_FOREVER, keep_alive_seconds
from mlx_responses.service.models.source import ModelSource, served_ids

SEED_TABLE = {
    "--responses-store-max-entries": (1024, "LLAMA_ARG_RESPONSES_STORE_MAX_ENTRIES"),
    "--responses-store-max-bytes": (268435456, "MLXCEL_RESPONSES_STORE_MAX_BYTES"),
    "--responses-store-ttl-secs": (3600, "LLAMA_ARG_RESPONSES_STORE_TTL_SECS"),
    "--responses-background-max-jobs": (64, "MLXCEL_RESPONSES_BACKGROUND_MAX_JOBS"),
    "--responses-background-ephemeral-ttl-secs": (
        600,
        "MLXCEL_RESPONSES_BACKGROUND_EPHEMERAL_TTL_SECS",
    ),
    "--conversation-store-max-entries": (256, "LLAMA_ARG_CONVERSATION_STORE_MAX_ENTRIES"),
    "--conversation-store-max-bytes": (67108864, "MLXCEL_CONVERSATION_STORE_MAX_BYTES"),
    "--conversation-store-ttl-secs": (3600, "LLAMA_ARG_CONVERSATION_STORE_TTL_SECS"),
}


def _parse(argv: list[str], env: dict[str, str]) -> Settings:
    parser = argparse.ArgumentParser()
    add_core_arguments(parser, env)
    return settings_from_args(parser.parse_args(argv), env)


def test_flags_match_the_seed() -> None:
    assert {f.flag: (f.default, f.env) for f in STORE_FLAGS} == SEED_TABLE


def test_defaults() -> None:
    settings = _parse([], {})
    for spec in STORE_FLAGS:
        assert getattr(settings, spec.field) == spec.default
    assert settings.reasoning_echo_max_bytes == 16 * 1024 * 1024


@pytest.mark.parametrize("spec", STORE_FLAGS, ids=lambda s: s.flag)
def test_environment_then_flag(spec: object) -> None:
    env = {spec.env: "7"}  # type: ignore[attr-defined]
    assert getattr(_parse([], env), spec.field) == 7  # type: ignore[attr-defined]
    flag_value = _parse([spec.flag, "9"], env)  # type: ignore[attr-defined]
    assert getattr(flag_value, spec.field) == 9  # type: ignore[attr-defined]


def test_reasoning_echo_env() -> None:
    assert _parse([], {"MLXCEL_REASONING_ECHO_MAX_BYTES": "0"}).reasoning_echo_max_bytes == 0


def test_ephemeral_ttl_zero_fails_startup() -> None:
    with pytest.raises(ConfigError):
        _parse(["--responses-background-ephemeral-ttl-secs", "0"], {})


def test_bad_env_value_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        _parse([], {"LLAMA_ARG_RESPONSES_STORE_MAX_ENTRIES": "lots"})


def test_negative_limits_fail() -> None:
    with pytest.raises(ConfigError):
        _parse(["--responses-store-max-bytes", "-1"], {})


def test_max_prompt_tokens_flag() -> None:
    assert _parse([], {}).max_prompt_tokens == 0  # no bound beyond the model's context
    assert _parse(["--max-prompt-tokens", "16384"], {}).max_prompt_tokens == 16384
    with pytest.raises(ConfigError, match="--max-prompt-tokens"):
        _parse(["--max-prompt-tokens", "-1"], {})


def test_image_encoding_cache_bytes_flag() -> None:
    assert _parse([], {}).image_encoding_cache_bytes == 1 << 30
    assert _parse(["--image-encoding-cache-bytes", "0"], {}).image_encoding_cache_bytes == 0
    with pytest.raises(ConfigError, match="--image-encoding-cache-bytes"):
        _parse(["--image-encoding-cache-bytes", "-1"], {})


def test_prompt_checkpoint_tokens_flag() -> None:
    assert _parse([], {}).prompt_checkpoint_tokens == 4096
    assert _parse(["--prompt-checkpoint-tokens", "0"], {}).prompt_checkpoint_tokens == 0
    with pytest.raises(ConfigError, match="--prompt-checkpoint-tokens"):
        _parse(["--prompt-checkpoint-tokens", "-1"], {})


def test_speculative_flags() -> None:
    settings = _parse(["--speculative", "ngram", "--num-draft-tokens", "6"], {})
    assert (settings.speculative, settings.num_draft_tokens) == ("ngram", 6)
    assert _parse([], {}).speculative == "ngram"  # on by default
    assert _parse(["--speculative", "off"], {}).speculative == "off"
    assert _parse(["--speculative", "none"], {}).speculative == "none"  # served as off
    assert _parse([], {"MLX_RESPONSES_SPECULATIVE": "off"}).speculative == "off"
    with pytest.raises(ConfigError):
        _parse(["--num-draft-tokens", "0"], {})
    drafted = _parse(["--speculative", "draft", "--draft-model", "/models/small"], {})
    assert (drafted.speculative, str(drafted.draft_model)) == ("draft", "/models/small")
    with pytest.raises(ConfigError, match="--draft-model"):
        _parse(["--speculative", "draft"], {})
    with pytest.raises(ConfigError, match="--speculative draft"):
        _parse(["--draft-model", "/models/small"], {})


def test_no_mtp_flag_and_env() -> None:
    assert _parse([], {}).no_mtp is False  # a checkpoint's own MTP head drafts by default
    assert _parse(["--no-mtp"], {}).no_mtp is True
    assert _parse([], {"MLX_RESPONSES_NO_MTP": "1"}).no_mtp is True


def test_kv_bits_flag() -> None:
    assert _parse(["--kv-bits", "8"], {}).kv_bits == 8
    assert _parse([], {}).kv_bits is None
    with pytest.raises(SystemExit):
        _parse(["--kv-bits", "3"], {})


def test_stream_window_flag() -> None:
    assert _parse([], {}).stream_window_ms == 25.0
    assert _parse(["--stream-window-ms", "0"], {}).stream_window_ms == 0.0
    with pytest.raises(ConfigError, match="--stream-window-ms"):
        _parse(["--stream-window-ms", "-1"], {})


def test_batch_wait_flag() -> None:
    assert _parse([], {}).batch_wait_ms == 0.0  # a lone request never waits by default
    assert _parse(["--batch-wait-ms", "5"], {}).batch_wait_ms == 5.0
    with pytest.raises(ConfigError, match="--batch-wait-ms"):
        _parse(["--batch-wait-ms", "-1"], {})


def test_prefill_batch_size_flag() -> None:
    assert _parse([], {}).prefill_batch_size is None  # the device's default (the engine's)
    assert _parse(["--prefill-batch-size", "64"], {}).prefill_batch_size == 64
    with pytest.raises(ConfigError, match="--prefill-batch-size"):
        _parse(["--prefill-batch-size", "0"], {})


def test_engine_flag() -> None:
    assert _parse([], {}).engine == "auto"
    assert _parse(["--engine", "batch"], {}).engine == "batch"
    assert _parse(["--engine", "slots"], {}).engine == "slots"
    assert _parse(["--engine", "slots", "--kv-bits", "8"], {}).kv_bits == 8
    assert _parse(["--engine", "slots", "--speculative", "ngram"], {}).speculative == "ngram"


def test_store_url_default_env_and_flag() -> None:
    assert _parse([], {}).store_url == "memory"
    env = {"MLX_RESPONSES_STORE_URL": "redis://10.0.0.5:6379/2"}
    assert _parse([], env).store_url == "redis://10.0.0.5:6379/2"
    assert _parse(["--store", "redis://h:1/0"], env).store_url == "redis://h:1/0"
    with pytest.raises(ConfigError, match="--store"):
        _parse(["--store", "mysql://h"], {})


def test_facade_takes_several_cores() -> None:
    from mlx_responses.launcher.cli import build_parser

    args = build_parser().parse_args(["facade", "--core", "a:1", "--core", "dns:///cores:2"])
    assert args.core == ["a:1", "dns:///cores:2"]


def test_hosted_tools_flag_and_env() -> None:
    assert _parse([], {}).hosted_tools == "reject"
    assert _parse([], {"MLXCEL_HOSTED_TOOLS": "drop"}).hosted_tools == "drop"
    assert _parse(["--hosted-tools", "reject"], {"MLXCEL_HOSTED_TOOLS": "drop"}).hosted_tools == (
        "reject"
    )
    with pytest.raises(ConfigError):
        _parse(["--hosted-tools", "ignore"], {})


def test_media_flag_and_env() -> None:
    assert _parse([], {}).media == "reject"
    assert _parse([], {"MLXCEL_MEDIA": "drop"}).media == "drop"
    assert _parse(["--media", "reject"], {"MLXCEL_MEDIA": "drop"}).media == "reject"
    with pytest.raises(ConfigError, match="--media"):
        _parse(["--media", "describe"], {})


def test_model_flags_repeat_and_pair_up() -> None:
    s = _parse(
        ["--model", "a", "--model", "b", "--model-alias", "first", "--max-loaded-models", "1"], {}
    )
    assert s.models == (Path("a"), Path("b"))
    assert s.models[0] == Path("a")
    assert s.model_aliases == ("first",)
    assert s.max_loaded_models == 1
    default = _parse([], {})
    assert default.models == (BUNDLED_MODEL,) and default.max_loaded_models is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "a", "--model-alias", "x", "--model-alias", "y"], "more --model-alias"),
        (["--model-alias", ""], "must not be empty"),
        (["--max-loaded-models", "0"], "--max-loaded-models must be at least 1"),
    ],
)
def test_bad_model_flags_are_config_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _parse(argv, {})


def test_served_ids_follow_aliases_and_refuse_twins(tmp_path: Path) -> None:
    a, b = ModelSource(tmp_path / "a", "a"), ModelSource(tmp_path / "x" / "a", "a")
    assert served_ids([a, b], ["one"]) == ["one", "a"]
    with pytest.raises(ConfigError, match="several --model entries are named a"):
        served_ids([a, b], [])


def test_the_prompt_cache_disk_tier_is_on_under_the_user_cache_by_default() -> None:
    """Like Hugging Face's cache: $XDG_CACHE_HOME, else ~/.cache; a flag or variable moves it,
    --no-prompt-cache-disk turns it off. Settings built in code have none unless given."""
    assert _parse([], {"XDG_CACHE_HOME": "/x"}).prompt_cache_dir == Path(
        "/x/mlx-responses/prompt-cache"
    )
    home = Path.home() / ".cache" / "mlx-responses" / "prompt-cache"
    assert _parse([], {}).prompt_cache_dir == home
    env = {"MLX_RESPONSES_PROMPT_CACHE_DIR": "/e"}
    assert _parse([], env).prompt_cache_dir == Path("/e")
    assert _parse(["--prompt-cache-dir", "/f"], env).prompt_cache_dir == Path("/f")
    assert _parse(["--no-prompt-cache-disk"], {}).prompt_cache_dir is None
    assert _parse(["--prompt-cache-disk-bytes", "5"], {}).prompt_cache_disk_bytes == 5
    assert Settings().prompt_cache_dir is None
    with pytest.raises(ConfigError, match="--prompt-cache-disk-bytes"):
        _parse(["--prompt-cache-disk-bytes", "-1"], {})


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (0, 0.0),
        (2.5, 2.5),
        ("300", 300.0),
        ("-1", KEEP_FOREVER),
        (-5, KEEP_FOREVER),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("250ms", 0.25),
        ("-1m", KEEP_FOREVER),
        ("0s", 0.0),
        (1e300, KEEP_FOREVER),  # beyond 10^9 s: for good
        (10**400, KEEP_FOREVER),  # beyond any double (JSON allows it)
    ],
)
def test_keep_alive_reads_seconds_and_durations(value: object, seconds: float) -> None:
    assert keep_alive_seconds(value) == seconds
    if isinstance(value, str):  # the OpenAPI document's pattern takes it too
        assert re.fullmatch(KEEP_ALIVE_PATTERN.strip("^$"), value)


@pytest.mark.parametrize(
    "value", ["soon", "5 m", "1d", "m", "", " 5m", "5m\n", "٣s", True, None, [], float("nan")]
)
def test_keep_alive_refuses_anything_else(value: object) -> None:
    with pytest.raises(ValueError):
        keep_alive_seconds(value)
    if isinstance(value, str):  # and so does the OpenAPI document's pattern
        assert not re.fullmatch(KEEP_ALIVE_PATTERN.strip("^$"), value)


def test_lifecycle_flags() -> None:
    s = _parse(["--keep-alive", "1h30m", "--pin", "a", "--pin", "b", "--model-dir", "/m"], {})
    assert (s.keep_alive, s.pins, s.model_dirs) == (5400.0, ("a", "b"), (Path("/m"),))
    assert s.models == ()  # --model-dir alone: no bundled model
    default = _parse([], {})
    assert (default.keep_alive, default.pins, default.model_dirs) == (300.0, (), ())
    assert _parse(["--keep-alive", "-1"], {}).keep_alive == KEEP_FOREVER
    with pytest.raises(SystemExit):
        _parse(["--keep-alive", "soon"], {})


@pytest.mark.parametrize("value", ["inf", "1e400", "nan", "NaNG", "1e308T", "banana"])
def test_a_bad_memory_limit_exits_2_alike_as_flag_and_variable(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One parser (the flag's type) for --memory-limit and MLX_RESPONSES_MEMORY_LIMIT: each
    bad value is a usage error (exit 2) naming it, never a traceback."""
    from mlx_responses.launcher.cli import build_parser

    with pytest.raises(SystemExit) as flag:
        build_parser().parse_args(["serve", "--memory-limit", value])
    assert flag.value.code == 2
    assert f"invalid memory size {value!r}" in capsys.readouterr().err
    monkeypatch.setenv("MLX_RESPONSES_MEMORY_LIMIT", value)
    with pytest.raises(SystemExit) as variable:
        build_parser()
    assert variable.value.code == 2
    err = capsys.readouterr().err
    assert f"MLX_RESPONSES_MEMORY_LIMIT={value!r}: invalid memory size {value!r}" in err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
def test_a_float_flag_must_be_finite(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from mlx_responses.launcher.cli import build_parser

    with pytest.raises(SystemExit) as flag:
        build_parser().parse_args(["serve", f"--shutdown-grace-secs={value}"])
    assert flag.value.code == 2 and "must be finite" in capsys.readouterr().err
