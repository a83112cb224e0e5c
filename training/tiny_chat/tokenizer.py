"""Builds the tiny chat model's byte-level BPE tokenizer and its Hugging Face config files."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)

from training.tiny_chat.template import CHAT_TEMPLATE

log = logging.getLogger(__name__)

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
# Added but not "special" (as in Qwen3), so decode() keeps them even with skip_special_tokens.
MARKUP_TOKENS: tuple[str, ...] = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)


def byte_level(text: str) -> str:
    """The byte-level (GPT-2) alphabet spelling of ``text``."""
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return "".join(piece for piece, _ in pre.pre_tokenize_str(text))


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    # GPT-2's split: words keep one leading space, punctuation runs stay together.
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def build_tokenizer(corpus: Iterable[str], words: Iterable[str], n_merges: int = 700) -> Tokenizer:
    """A byte-level BPE: merges learned on ``corpus`` plus one token per word and ' word'.

    The model runs with ``ignore_merges`` so any pre-token that is itself in the vocabulary (every
    lexicon word, bare or with its leading space) is a single token; other text falls back to the
    learned merges and finally to bytes.
    """
    base = Tokenizer(models.BPE())
    base.normalizer = normalizers.NFC()
    base.pre_tokenizer = _pre_tokenizer()
    initial = pre_tokenizers.ByteLevel.alphabet()
    reserved = [*SPECIAL_TOKENS, *MARKUP_TOKENS]
    trainer = trainers.BpeTrainer(
        vocab_size=len(reserved) + len(initial) + n_merges,
        min_frequency=2,
        special_tokens=reserved,
        initial_alphabet=initial,
        show_progress=False,
    )
    base.train_from_iterator(corpus, trainer=trainer)
    learned = json.loads(base.to_str())["model"]
    vocab: dict[str, int] = dict(learned["vocab"])
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]
    for token, expected_id in zip(reserved, range(len(reserved)), strict=True):
        if vocab.get(token) != expected_id:
            raise RuntimeError(f"reserved token {token} did not get id {expected_id}")
    added = 0
    for word in words:
        for variant in (word, " " + word):
            piece = byte_level(variant)
            if piece not in vocab:
                vocab[piece] = len(vocab)
                added += 1
    log.info("tokenizer: %d learned entries + %d word entries", len(learned["vocab"]), added)

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = _pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    for token, expected_id in zip(reserved, range(len(reserved)), strict=True):
        if tok.token_to_id(token) != expected_id:
            raise RuntimeError(f"added token {token} moved to id {tok.token_to_id(token)}")
    return tok


def tokenizer_config(model_max_length: int) -> dict[str, Any]:
    """tokenizer_config.json for transformers' AutoTokenizer (and so mlx_lm.load)."""
    decoder = {}
    for i, token in enumerate((*SPECIAL_TOKENS, *MARKUP_TOKENS)):
        decoder[str(i)] = {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": token in SPECIAL_TOKENS,
        }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "unk_token": None,
        "additional_special_tokens": [IM_START, IM_END],
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "errors": "replace",
        "tool_parser_type": "json_tools",
        "chat_template": CHAT_TEMPLATE,
    }


def save_tokenizer(tok: Tokenizer, out_dir: Path, model_max_length: int) -> None:
    """Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    config = tokenizer_config(model_max_length)
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    special_map = {
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "additional_special_tokens": [IM_START, IM_END],
    }
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special_map, indent=2) + "\n")
