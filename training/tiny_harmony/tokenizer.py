"""The tiny gpt-oss model's tokenizer: the bundled model's byte-level BPE with harmony's tokens.

The bundled tokenizer's ChatML and markup tokens (ids 1-8) are replaced by harmony's control
tokens, all special, so its ids differ from gpt-oss's own (200006, ...): the server must read
them from the tokenizer. Writes the Hugging Face files and a generation_config.json that lists
only `<|return|>` and `<|endoftext|>` as stops, as the early gpt-oss conversions did (the server
adds `<|call|>` itself).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from training.tiny_harmony.template import CHAT_TEMPLATE

ENDOFTEXT = "<|endoftext|>"
HARMONY_TOKENS = (
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|channel|>",
    "<|constrain|>",
    "<|return|>",
    "<|call|>",
    "<|reserved_0|>",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def write_tokenizer(source: Path, out: Path) -> dict[str, int]:
    """Writes the harmony tokenizer built from `source`'s into `out`; its token ids by text."""
    out.mkdir(parents=True, exist_ok=True)
    data = json.loads((source / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    added = [t for t in data["added_tokens"] if t["content"] != ENDOFTEXT]
    if len(added) != len(HARMONY_TOKENS):
        raise ValueError(f"expected {len(HARMONY_TOKENS)} markup tokens to replace")
    ids = {ENDOFTEXT: vocab[ENDOFTEXT]}
    for token, text in zip(added, HARMONY_TOKENS, strict=True):
        del vocab[token["content"]]
        vocab[text] = token["id"]
        token.update(content=text, special=True)
        ids[text] = token["id"]
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|return|>",
        "pad_token": ENDOFTEXT,
        "unk_token": None,
        "model_max_length": 65536,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    special = {"eos_token": "<|return|>", "pad_token": ENDOFTEXT}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2))
    generation = {"eos_token_id": [ids["<|return|>"], ids[ENDOFTEXT]], "pad_token_id": 0}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2))
    return ids


def copy_tokenizer(source: Path, out: Path) -> None:
    """Copies a harmony model's tokenizer files (and its generation config)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in (*TOKENIZER_FILES, "generation_config.json"):
        shutil.copy(source / name, out / name)
