"""Letter-factored embeddings for the tokens that spell unknown words (training only).

An unknown word is spelled in letter pairs and single letters (`tokenizer.build_tokenizer`):
702 tokens, each seen a few hundred times in training, so a copy of one is learned per token and
stays unreliable (A1 copied `er` as `ad` in most English words). Here such a token's embedding
is the sum of a first-letter and a second-letter vector (`ab` = firsts[a] + seconds[b], `a` =
firsts[a] + seconds[none]): 53 vectors shared by all 702 tokens, each seen thousands of times,
and copying a pair is copying two letters. Output embeddings are tied, so a pair's logit splits
the same way. `materialize` writes the sums back into a plain embedding table: the saved model
is an ordinary Qwen3 checkpoint.

Variants are tied the same way: with `underscore_words`, `_word` is 'word' plus one shared offset
for the whole of training (not only at the start, which R2/X1 tried: the rare `_word` tokens were
then never produced), so "this word as a later name part" is one direction learned from every
name, and a name part is copied as its word is.

Imports mlx: import this module only after `train.preload_blas`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import mlx.core as mx
import numpy as np
from mlx import nn

from training.tiny_chat.tokenizer import LETTERS, byte_level, underscored

if TYPE_CHECKING:
    from tokenizers import Tokenizer

NONE = len(LETTERS)  # the second letter of a single-letter token


def spelled_tokens(tok: Tokenizer) -> dict[int, tuple[int, int]]:
    """Token id -> (first letter, second letter or NONE) of every letter and letter-pair token."""
    out: dict[int, tuple[int, int]] = {}
    for i, a in enumerate(LETTERS):
        spellings = {a: (i, NONE)} | {a + b: (i, j) for j, b in enumerate(LETTERS)}
        for text, parts in spellings.items():
            token_id = tok.token_to_id(text)
            if token_id is None:
                raise RuntimeError(f"the tokenizer has no token {text!r}")
            out[token_id] = parts
    return out


def underscore_variants(tok: Tokenizer, words: Iterable[str]) -> dict[int, int]:
    """`_word` token id -> 'word' token id, for every lexicon word that has both."""
    out: dict[int, int] = {}
    for word in words:
        variant, base = tok.token_to_id(byte_level(underscored(word))), tok.token_to_id(word)
        if variant is not None and base is not None:
            out[variant] = base
    return out


class SpelledEmbedding(nn.Module):
    """rows = free rows (other tokens) + onehot(first) @ firsts + onehot(second) @ seconds;
    then each variant's row = its base's row + the shared offset."""

    def __init__(
        self,
        weight: np.ndarray,
        parts: dict[int, tuple[int, int]],
        seed: int,
        variants: dict[int, int] | None = None,
    ) -> None:
        super().__init__()
        vocab, dim = weight.shape
        first = np.zeros((vocab, len(LETTERS)), dtype=np.float32)
        second = np.zeros((vocab, NONE + 1), dtype=np.float32)
        free = np.ones((vocab, 1), dtype=np.float32)
        for token_id, (a, b) in parts.items():
            first[token_id, a] = second[token_id, b] = 1.0
            free[token_id] = 0.0
        base_of = np.arange(vocab, dtype=np.int32)
        is_variant = np.zeros((vocab, 1), dtype=np.float32)
        for token_id, base in (variants or {}).items():
            base_of[token_id], is_variant[token_id] = base, 1.0
            free[token_id] = 0.0
        rng = np.random.default_rng(seed)
        scale = float(weight.std()) / np.sqrt(2.0)  # a sum of two has the other rows' scale
        self.free = mx.array(weight.astype(np.float32))
        self.firsts = mx.array(rng.normal(0.0, scale, (len(LETTERS), dim)).astype(np.float32))
        self.seconds = mx.array(rng.normal(0.0, scale, (NONE + 1, dim)).astype(np.float32))
        self.offset = mx.array(rng.normal(0.0, float(weight.std()), (1, dim)).astype(np.float32))
        self.first_of = mx.array(first)
        self.second_of = mx.array(second)
        self.free_mask = mx.array(free)
        self.base_of = mx.array(base_of)
        self.is_variant = mx.array(is_variant)
        self.freeze(keys=["first_of", "second_of", "free_mask", "base_of", "is_variant"])

    @property
    def weight(self) -> mx.array:
        rows = (
            self.free * self.free_mask + self.first_of @ self.firsts + self.second_of @ self.seconds
        )
        return rows[self.base_of] + self.is_variant * self.offset

    def __call__(self, tokens: mx.array) -> mx.array:
        return self.weight[tokens]

    def as_linear(self, x: mx.array) -> mx.array:
        return x @ self.weight.T


def factor_embeddings(
    model: nn.Module, tok: Tokenizer, seed: int, variants: dict[int, int] | None = None
) -> None:
    """Replace the model's embedding table with one whose spelled rows are letter sums (and
    whose variant rows are their base's row plus an offset)."""
    weight = np.array(model.model.embed_tokens.weight)
    model.model.embed_tokens = SpelledEmbedding(weight, spelled_tokens(tok), seed, variants)


def materialize(model: nn.Module) -> None:
    """Put back a plain `nn.Embedding` holding the current sums (before saving)."""
    current = model.model.embed_tokens
    if not isinstance(current, SpelledEmbedding):
        return
    weight = current.weight
    table = nn.Embedding(weight.shape[0], weight.shape[1])
    table.weight = weight
    model.model.embed_tokens = table
