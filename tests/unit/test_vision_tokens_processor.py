"""A processor that takes none of the tokenizer's keywords (mlx-vlm's LLaVA hands every keyword
to its image processor) still expands an image part: called without them, its tokens lose the
BOS its tokenizer then adds, so no BOS lands in the middle of a prompt."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from mlx_responses.service.models.vision_tokens import Placeholder, expand_images

BOS, IMAGE = 1, 9


class _KeywordlessProcessor:
    """Expands `<image>` into three image tokens; refuses `add_special_tokens` (TypeError, as
    an image processor does) and then adds a BOS, as a llama tokenizer does."""

    tokenizer = SimpleNamespace(bos_token_id=BOS)
    image_token_id = IMAGE

    def __call__(self, *, text: list[str], images: list[Any], **kwargs: Any) -> dict[str, Any]:
        if kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
        ids = [BOS] + [IMAGE] * 3 * text[0].count("<image>")
        return {
            "input_ids": np.array([ids]),
            "attention_mask": np.ones((1, len(ids)), np.int64),
            "pixel_values": np.zeros((len(images), 3, 4, 4), np.float32),
        }


def test_an_image_expands_without_the_tokenizers_bos() -> None:
    placeholder = Placeholder("<image>", (IMAGE,))
    tokens, arrays = expand_images([5, 6, IMAGE, 7], placeholder, _KeywordlessProcessor(), [None])
    assert tokens == [5, 6, IMAGE, IMAGE, IMAGE, 7]
    assert arrays["pixel_values"].shape == (1, 3, 4, 4)
