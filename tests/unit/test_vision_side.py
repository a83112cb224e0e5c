"""Which vision-language models the engine serves: the Qwen-VL family, on the slots."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.vision.side import ImageEncoder, VisionSide


def test_vision_models_outside_the_qwen_vl_family_are_refused_at_load() -> None:
    """The slots drive Qwen-VL's language side; another family is a clear start error, not
    a model called with inputs it does not take."""

    class Gemma:
        config = SimpleNamespace(model_type="gemma3")
        language_model = object()

        def get_input_embeddings(self) -> None: ...

    loaded: Any = SimpleNamespace(model=Gemma(), path=Path("/models/gemma"))
    with pytest.raises(ConfigError, match="gemma3 vision-language model"):
        VisionSide.of(loaded, ImageEncoder())
    text: Any = SimpleNamespace(model=object(), path=Path("/models/text"))
    assert VisionSide.of(text, ImageEncoder()) is None
