"""What a distributed group serves, decided at startup: the mode each model supports
(`--distributed auto|tensor|pipeline`), the settings a group refuses, and its prompt cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlx_responses.service.config import BUNDLED_MODEL, ConfigError, Settings
from mlx_responses.service.engine.distributed.load import resolve_mode
from mlx_responses.service.models.distributed import group_prompt_cache, group_settings

from tests.support.random_model import build_random_model


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_model(tmp_path_factory.mktemp("q2") / "q2", model_type="qwen2")


def test_auto_is_tensor_where_the_model_can() -> None:
    assert resolve_mode("auto", BUNDLED_MODEL) == "tensor"  # qwen3: shard() only


def test_a_mode_the_model_lacks_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"does not support it \(supported: tensor\)"):
        resolve_mode("pipeline", BUNDLED_MODEL)


def test_pipeline_needs_the_weight_index(qwen2: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.safetensors\.index\.json"):
        resolve_mode("pipeline", qwen2)
    (qwen2 / "model.safetensors.index.json").write_text('{"weight_map": {}}')
    assert resolve_mode("pipeline", qwen2) == "pipeline"


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        (Settings(models=(BUNDLED_MODEL, BUNDLED_MODEL)), "one --model"),
        (
            Settings(speculative="draft", draft_model=BUNDLED_MODEL),
            "--speculative draft",
        ),
    ],
    ids=["two models", "draft model"],
)
def test_what_a_group_refuses(settings: Settings, refusal: str) -> None:
    with pytest.raises(ConfigError, match=refusal):
        group_settings(settings)


def test_a_group_resolves_its_mode() -> None:
    assert group_settings(Settings()).distributed == "tensor"


def test_the_prompt_cache_in_a_group() -> None:
    """No disk tier in a group; no memory tier either where ranks hold different layers."""
    assert group_prompt_cache(Settings(distributed="tensor", prompt_cache_max_entries=7)) == (
        7,
        False,
    )
    assert group_prompt_cache(Settings(distributed="pipeline")) == (0, False)
