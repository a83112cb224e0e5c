"""Model folders whose files cannot be served: a clear error naming the folder, the file and
the field (at startup a ConfigError, while serving a 400 for that model's requests only);
every other model and the listing are served as ever."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.model import context_length_of, sampling_defaults
from mlx_responses.service.models.folder_check import ModelFolderError, check_folder
from mlx_responses.service.models.vision_config import vision_folder

from tests.http.test_model_lifecycle import models
from tests.http.test_models import create, post
from tests.support.stack import Stack

StackFactory = Callable[..., Stack]

# file, content, what the error names
BAD = [
    ("config.json", "[1, 2, 3]", "must be a JSON object, not a list"),
    ("config.json", '{"text_config": "x"}', "`text_config` must be an object, not text"),
    ("config.json", '{"num_hidden_layers": "8"}', "`num_hidden_layers` must be an integer"),
    ("config.json", "{oops", "not JSON"),
    ("tokenizer_config.json", "7", "must be a JSON object, not a number"),
    ("tokenizer_config.json", '{"chat_template": 5}', "`chat_template` must be text"),
    ("tokenizer_config.json", '{"chat_template": "{% if %}"}', "is not a Jinja template"),
    ("tokenizer_config.json", '{"eos_token": [1]}', "`eos_token` must be text"),
    ("generation_config.json", '{"temperature": "hot"}', "`temperature` must be a number"),
    ("generation_config.json", '{"eos_token_id": "x"}', "`eos_token_id` must be a token id"),
    ("chat_template.jinja", "{% for %}", "is not a Jinja template"),
    ("chat_template.json", '{"chat_template": null}', "`chat_template` must be text"),
]


def _spoil(folder: Path, file: str, content: str) -> None:
    """Writes `content` over `file` (a copy: the folder's files may be links)."""
    (folder / file).unlink(missing_ok=True)
    (folder / file).write_text(content)


@pytest.mark.parametrize(("file", "content", "names"), BAD)
def test_each_bad_file_is_named_with_its_field(
    random_model: Path, tmp_path: Path, file: str, content: str, names: str
) -> None:
    folder = tmp_path / "m"
    shutil.copytree(random_model, folder)
    check_folder(folder)  # the copy as it came is fine
    _spoil(folder, file, content)
    with pytest.raises(ModelFolderError) as raised:
        check_folder(folder)
    assert str(folder) in str(raised.value) and file in str(raised.value)
    assert names in str(raised.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
FIELDS = ["text_config", "vision_config", "max_position_embeddings", "vocab_size", "model_type"]
GEN_FIELDS = ["temperature", "top_p", "do_sample", "eos_token_id"]


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(JSON, st.dictionaries(st.sampled_from(FIELDS), JSON)),
    st.one_of(st.none(), JSON, st.dictionaries(st.sampled_from(GEN_FIELDS), JSON)),
    st.integers(0, 40),
)
def test_any_config_is_served_or_named(
    tmp_path_factory: pytest.TempPathFactory, config: Any, generation: Any, cut: int
) -> None:
    """Random (and truncated) config.json and generation_config.json: check_folder passes
    them, and then every reader of them works, or it raises ModelFolderError."""
    folder = tmp_path_factory.mktemp("prop")
    text = json.dumps(config)
    (folder / "config.json").write_text(text[:cut] if cut < len(text) and cut % 3 == 0 else text)
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation))
    try:
        checked = check_folder(folder)
    except ModelFolderError:
        return
    assert context_length_of(checked) > 0
    vision_folder(folder)
    temperature, top_p = sampling_defaults(folder)
    assert temperature >= 0 and 0 <= top_p <= 1


def test_a_bad_folder_at_startup_is_a_config_error_naming_it(
    model_path: Path, random_model: Path, tmp_path: Path
) -> None:
    shelf = tmp_path / "shelf"
    shutil.copytree(random_model, shelf / "listy")
    _spoil(shelf / "listy", "config.json", "[1, 2, 3]")
    for overrides in ({"model_dirs": (shelf,)}, {"models": (model_path, shelf / "listy")}):
        stack = Stack(model_path, **overrides)
        with pytest.raises(ConfigError, match=r"listy.*config\.json: must be a JSON object"):
            stack.start()
        stack.stop()


def test_a_bad_folder_added_while_serving_refuses_only_its_own_requests(
    make_stack: StackFactory, model_path: Path, random_model: Path, tmp_path: Path
) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    stack = make_stack(models=(model_path,), model_dirs=(shelf,))
    for name, file, content, field in [
        ("listy", "config.json", "[1, 2, 3]", "config.json: must be a JSON object"),
        ("texty", "config.json", '{"text_config": "x"}', "`text_config` must be an object"),
    ]:
        shutil.copytree(random_model, shelf / name)
        _spoil(shelf / name, file, content)
        assert list(models(stack)) == [model_path.name]  # the listing works, without it
        refused = post(stack, "/v1/responses", model=name, input="hi")
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["param"] == "model" and error["code"] == "invalid_model"
        assert str(shelf / name) in error["message"] and field in error["message"]
        unknown = post(stack, "/v1/responses", model="nobody", input="hi")
        assert unknown.status_code == 404
        assert create(stack, model_path.name)["status"] == "completed"
    # Repaired, it is served.
    shutil.rmtree(shelf / "listy")
    shutil.copytree(random_model, shelf / "listy")
    assert create(stack, "listy")["model"] == "listy"
    # Listed while fine, spoiled before its first load: its request is the 400, at load.
    shutil.copytree(random_model, shelf / "later")
    assert "later" in models(stack)
    _spoil(shelf / "later", "tokenizer_config.json", '{"chat_template": "{% if %}"}')
    refused = post(stack, "/v1/responses", model="later", input="hi")
    assert refused.status_code == 400, refused.text
    assert "tokenizer_config.json: `chat_template` is not a Jinja template" in refused.text
    assert httpx.get(f"{stack.base_url}/v1/models", timeout=10).status_code == 200
