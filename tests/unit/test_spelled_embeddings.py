"""Letter-factored training embeddings: pairs are letter sums, and the saved table matches."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from mlx import nn
from mlx_responses.service.config import BUNDLED_MODEL
from tokenizers import Tokenizer

from training.tiny_chat.spelled import (
    NONE,
    SpelledEmbedding,
    factor_embeddings,
    materialize,
    spelled_tokens,
    underscore_variants,
)
from training.tiny_chat.tokenizer import LETTERS, build_tokenizer
from training.tiny_chat.train import TrainConfig, make_model, model_config

TOKENIZER = Tokenizer.from_file(str(BUNDLED_MODEL / "tokenizer.json"))


def _model() -> nn.Module:
    cfg = TrainConfig(hidden_size=32, layers=1, heads=2, kv_heads=2, head_dim=16)
    vocab = -(-TOKENIZER.get_vocab_size() // 64) * 64
    config = model_config(cfg, vocab, eos_id=2, pad_id=0)
    model = make_model(config)
    mx.eval(model.parameters())
    return model


def test_every_letter_and_pair_is_spelled_once() -> None:
    parts = spelled_tokens(TOKENIZER)
    assert len(parts) == len(LETTERS) * (len(LETTERS) + 1)
    assert parts[TOKENIZER.token_to_id("er")] == (LETTERS.index("e"), LETTERS.index("r"))
    assert parts[TOKENIZER.token_to_id("q")] == (LETTERS.index("q"), NONE)
    assert TOKENIZER.token_to_id("weather") not in parts  # a lexicon word keeps a row of its own


def test_pair_rows_are_letter_sums_and_other_rows_are_free() -> None:
    model = _model()
    before = np.array(model.model.embed_tokens.weight)
    factor_embeddings(model, TOKENIZER, seed=0)
    table = model.model.embed_tokens
    assert isinstance(table, SpelledEmbedding)
    weight = np.array(table.weight)
    firsts, seconds = np.array(table.firsts), np.array(table.seconds)
    er = TOKENIZER.token_to_id("er")
    e, r = LETTERS.index("e"), LETTERS.index("r")
    np.testing.assert_allclose(weight[er], firsts[e] + seconds[r], rtol=1e-6)
    weather = TOKENIZER.token_to_id("weather")
    np.testing.assert_array_equal(weight[weather], before[weather])
    # only the free rows and the 53 letter vectors are trained; the one-hot maps stay fixed
    trainable = {k for k, _ in nn.utils.tree_flatten(table.trainable_parameters())}
    assert trainable == {"free", "firsts", "seconds", "offset"}


def test_a_gradient_on_one_pair_moves_its_letters() -> None:
    model = _model()
    factor_embeddings(model, TOKENIZER, seed=0)
    er = TOKENIZER.token_to_id("er")

    def loss(m: nn.Module) -> mx.array:
        return m.model.embed_tokens(mx.array([er])).sum()

    grads = nn.value_and_grad(model, loss)(model)[1]["model"]["embed_tokens"]
    e, r = LETTERS.index("e"), LETTERS.index("r")
    assert float(mx.abs(grads["firsts"][e]).sum()) > 0
    assert float(mx.abs(grads["seconds"][r]).sum()) > 0
    assert float(mx.abs(grads["firsts"][r]).sum()) == 0


def test_materialize_saves_the_same_model_as_a_plain_table() -> None:
    model = _model()
    factor_embeddings(model, TOKENIZER, seed=0)
    tokens = mx.array([TOKENIZER.encode("Reply with: lantern").ids])
    factored = model(tokens)
    materialize(model)
    assert isinstance(model.model.embed_tokens, nn.Embedding)
    np.testing.assert_allclose(np.array(model(tokens)), np.array(factored), rtol=1e-5, atol=1e-5)
    names = {k for k, _ in nn.utils.tree_flatten(model.parameters())}
    assert "model.embed_tokens.weight" in names
    assert not any("firsts" in k or "free" in k for k in names)


def test_an_underscore_variant_is_its_word_plus_the_shared_offset() -> None:
    corpus = ['{"name": "load_data_song"}', "Use the load_data_song tool."]
    tok = build_tokenizer(corpus, ["load", "data", "song"], min_count=1, underscore_words=True)
    encoded = tok.encode("load_data_song")
    assert encoded.tokens == ["load", "_data", "_song"]
    assert tok.encode("load_xq").tokens == ["load", "_", "xq"]  # unknown parts are still spelled
    words = ["load", "data", "song"]
    variants = underscore_variants(tok, words)
    assert variants == {tok.token_to_id("_" + w): tok.token_to_id(w) for w in words}
    model = _model()
    factor_embeddings(model, tok, seed=0, variants=variants)
    table = model.model.embed_tokens
    weight, offset = np.array(table.weight), np.array(table.offset)[0]
    data, under = tok.token_to_id("data"), tok.token_to_id("_data")
    np.testing.assert_allclose(weight[under], weight[data] + offset, rtol=1e-6)

    def loss(m: nn.Module) -> mx.array:
        return m.model.embed_tokens(mx.array([under])).sum()

    grads = nn.value_and_grad(model, loss)(model)[1]["model"]["embed_tokens"]
    assert float(mx.abs(grads["free"][data]).sum()) > 0  # training `_data` trains `data`
    assert float(mx.abs(grads["offset"]).sum()) > 0
    assert float(mx.abs(grads["free"][under]).sum()) == 0
