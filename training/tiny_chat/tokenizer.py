"""Builds the tiny chat model's byte-level BPE tokenizer and its Hugging Face config files."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
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


# GPT-2's split: a word keeps the one space before it (" paris"), punctuation runs stay together,
# an underscore is its own piece. (Splitting the space off every word was tried: then every other
# token is a bare space, the token before a word says nothing, and echo learned ~7x slower.)
# (`_word` as one piece, with a token per lexicon word, was tried in R2: tool names came out as
# frequent `_word`s instead of copies, tool_call 0.63 -> 0.00; see PILOTS.md.)
SPLIT_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# With `underscore_words`: `_word` is one piece too, and every lexicon word has a `_word` token,
# so `load_data_song` is `load _data _song` and each name part follows a distinct token. (Its
# embedding is 'word' plus a shared offset throughout training: spelled.py.)
UNDERSCORE_SPLIT_PATTERN = SPLIT_PATTERN.replace(r"| ?\p{N}+", r"|_\p{L}+| ?\p{N}+", 1)
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def word_variants(word: str) -> tuple[str, str]:
    """The two tokens of a lexicon word: bare and after a space."""
    return word, " " + word


def underscored(word: str) -> str:
    """A lexicon word's token as a later part of a snake_case name."""
    return "_" + word


def _pre_tokenizer(underscore_words: bool = False) -> pre_tokenizers.PreTokenizer:
    pattern = UNDERSCORE_SPLIT_PATTERN if underscore_words else SPLIT_PATTERN
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def pre_tokens(text: str, underscore_words: bool = False) -> list[str]:
    """The byte-level pre-tokens of ``text`` (what the vocabulary is looked up by)."""
    pre = _pre_tokenizer(underscore_words)
    return [piece for piece, _ in pre.pre_tokenize_str(text)]


def build_tokenizer(
    corpus: Iterable[str],
    words: Iterable[str],
    min_count: int = 8,
    underscore_words: bool = False,
) -> Tokenizer:
    """Whole-pre-token vocabulary with a letter-pair fallback.

    Every lexicon word and every pre-token seen ``min_count`` times in ``corpus`` (template
    boilerplate, JSON punctuation) is one token; the model runs with ``ignore_merges`` so such a
    pre-token is looked up whole. Any other word falls back to the 676 lowercase letter pairs and
    single letters (merges of letter pairs only, in a fixed order), anything else to bytes. An
    unknown word is thus spelled in short pieces, the same pieces wherever it appears.
    """
    reserved = [*SPECIAL_TOKENS, *MARKUP_TOKENS]
    vocab: dict[str, int] = {t: i for i, t in enumerate(reserved)}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    merges: list[tuple[str, str]] = []
    for a in LETTERS:
        for b in LETTERS:
            merges.append((a, b))
            vocab[a + b] = len(vocab)
    n_base = len(vocab)
    words = list(words)
    for word in words:
        for variant in word_variants(word):
            vocab.setdefault(byte_level(variant), len(vocab))
    if underscore_words:
        for word in words:
            vocab.setdefault(byte_level(underscored(word)), len(vocab))
    n_words = len(vocab) - n_base
    counts: Counter[str] = Counter()
    for text in corpus:
        counts.update(pre_tokens(text, underscore_words))
    for piece, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if count >= min_count:
            vocab.setdefault(piece, len(vocab))
    log.info(
        "tokenizer: %d base + %d words + %d corpus pre-tokens",
        n_base,
        n_words,
        len(vocab) - n_base - n_words,
    )

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = _pre_tokenizer(underscore_words)
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
