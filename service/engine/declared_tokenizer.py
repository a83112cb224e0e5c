"""A folder's tokenizer as its own files declare it, where transformers would rebuild another.

transformers 5 loads some model types' tokenizers through a registered class whatever
`tokenizer_config.json` names (its `MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS`: Qwen3.5 among
them), and that class rebuilds the BPE from the vocabulary and merges with its own
pre-tokenizer, dropping `tokenizer.json`'s settings (`ignore_merges`, the split pattern). A
folder that names the generic class (`PreTrainedTokenizerFast` or `TokenizersBackend`: "my
tokenizer.json is the tokenizer") then encodes differently from how it was trained: the tiny
Qwen3.5 (service/assets/tiny-qwen35-mtp, tiny-chat's word-level vocabulary) got its words split
into letter pairs and answered garbage. `as_declared` loads such a folder's tokenizer.json as
written; a folder naming a family's class (the real Qwen3.5's) keeps what transformers built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GENERIC = ("PreTrainedTokenizerFast", "TokenizersBackend")


def declares_its_file(folder: Path) -> bool:
    """Whether `folder`'s tokenizer_config.json names the generic class beside a
    tokenizer.json (the file is the tokenizer)."""
    config = folder / "tokenizer_config.json"
    if not config.is_file() or not (folder / "tokenizer.json").is_file():
        return False
    return json.loads(config.read_text()).get("tokenizer_class") in GENERIC


def as_declared(folder: Path, tokenizer: Any) -> Any:
    """`tokenizer` (a transformers tokenizer loaded from `folder`), or the folder's
    tokenizer.json as written where it declares that and transformers built another class."""
    if type(tokenizer).__name__ in GENERIC or not declares_its_file(folder):
        return tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder))
