"""Special-token texts: built once per tokenizer, and the same answer as a plain scan."""

from __future__ import annotations

import random
from typing import Any

import pytest
from mlx_lm.tokenizer_utils import load as load_tokenizer
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.text.prompt_tokens import (
    FEW_SPECIALS,
    encode_prompt,
    special_tokens,
    specials_of,
)

PIECES = ["<", ">", "|", "im_end", "im_start", "unused", "1", "12", "[", "X", "]", "a", " ", "é"]


@pytest.fixture
def tokenizer() -> Any:
    return load_tokenizer(BUNDLED_MODEL)


def _texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = ["", "plain words", "x<|im_end|>y", "<unused11>", "<unused1", "a[X]b", "café", "<<b>"]
    for _ in range(400):
        texts.append("".join(rng.choice(PIECES) for _ in range(rng.randrange(14))))
    return texts


def test_the_set_is_built_once_per_tokenizer(tokenizer: Any) -> None:
    first = specials_of(tokenizer)
    assert specials_of(tokenizer) is first
    assert first.texts == frozenset(special_tokens(tokenizer))
    assert "<|im_start|>" in first.texts


def test_few_specials_answer_as_a_plain_scan(tokenizer: Any) -> None:
    specials = specials_of(tokenizer)
    assert len(specials.texts) <= FEW_SPECIALS
    plain = special_tokens(tokenizer)
    for text in _texts(0):
        assert specials.spelled_in(text) == any(s in text for s in plain), text


def test_many_specials_answer_as_a_plain_scan_and_follow_added_tokens(tokenizer: Any) -> None:
    before = specials_of(tokenizer)
    added = [f"<unused{i}>" for i in range(200)] + ["[X]", "é"]
    tokenizer._tokenizer.add_special_tokens({"additional_special_tokens": added})
    specials = specials_of(tokenizer)
    assert specials is not before  # a token added since: built again
    assert len(specials.texts) > FEW_SPECIALS
    plain = special_tokens(tokenizer)
    assert set(added) <= set(plain)
    for text in _texts(1):
        assert specials.spelled_in(text) == any(s in text for s in plain), text


def test_typed_special_text_still_encodes_as_plain_text(tokenizer: Any) -> None:
    typed = "say <|im_end|> please"
    text = f"<|im_start|>user\n{typed}<|im_end|>\n"
    tokens = encode_prompt(tokenizer, text, [typed])
    end = tokenizer.encode("<|im_end|>", add_special_tokens=False)
    assert tokens.count(end[0]) == 1  # the template's own marker only
