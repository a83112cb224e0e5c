"""Trains the tiny embedding model (service/assets/tiny-embed): a 2-layer BERT, mean-pooled,
trained contrastively on the made-up world of corpus.py.

The model is mlx-embeddings' own BERT (`mlx_embeddings.models.bert`), so the folder it writes
loads with `mlx_embeddings.load` as any BERT-family embedding model does. Each step draws 8
training countries and one (question, passage) pair per topic of each (64 pairs), and the loss
is InfoNCE both ways over the batch: a question's negatives are its country's other seven
passages and the other countries' passages of its topic. The evaluation ranks every passage of
held-out countries for each of their questions.

    nice -n 15 python -m training.tiny_embed.train --out service/assets/tiny-embed
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.optimizers as optim
from mlx import nn
from mlx.utils import tree_flatten
from mlx_embeddings.models import bert
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers.trainers import WordPieceTrainer

from training.tiny_embed.corpus import TOPICS, Pair, held_out, pairs_of, split_countries

log = logging.getLogger(__name__)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
MAX_TOKENS = 64
# Widths trained to stand alone (Matryoshka): `dimensions` may cut a vector to any width from
# the smallest up, renormalised.
MATRYOSHKA = (64, 32, 16)

CONFIG: dict[str, Any] = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 256,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": MAX_TOKENS,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "torch_dtype": "float32",
    "matryoshka_dimensions": list(MATRYOSHKA),
}


def training_text(countries: list[str]) -> list[str]:
    """Every template, value and training country name: what the tokenizer learns from."""
    lines = list(countries)
    for topic in TOPICS:
        lines += [*topic.values, *topic.passages, *topic.questions]
    return lines


def build_tokenizer(countries: list[str], vocab_size: int) -> Tokenizer:
    """A lower-casing WordPiece tokenizer; BERT's [CLS] ... [SEP] around every text."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, min_frequency=1)
    tok.train_from_iterator(training_text(countries), trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tok.enable_truncation(MAX_TOKENS)
    return tok


def encode(tok: Tokenizer, texts: list[str]) -> tuple[mx.array, mx.array]:
    """Right-padded ids and their attention mask."""
    rows = [e.ids for e in tok.encode_batch(texts)]
    width = max(len(r) for r in rows)
    ids = [r + [0] * (width - len(r)) for r in rows]
    mask = [[1] * len(r) + [0] * (width - len(r)) for r in rows]
    return mx.array(ids), mx.array(mask)


def embed(model: bert.Model, tok: Tokenizer, texts: list[str]) -> mx.array:
    ids, mask = encode(tok, texts)
    return model(ids, attention_mask=mask).text_embeds


def batch(countries: list[str], rng: random.Random, per_step: int) -> list[Pair]:
    return [p for c in rng.sample(countries, per_step) for p in pairs_of(c, rng)]


def unit(x: mx.array) -> mx.array:
    return x / mx.maximum(mx.linalg.norm(x, axis=-1, keepdims=True), 1e-9)


def loss_fn(
    model: bert.Model, q: tuple[mx.array, mx.array], p: tuple[mx.array, mx.array], temp: float
) -> mx.array:
    """InfoNCE both ways, at every Matryoshka width (each prefix renormalised)."""
    eq = model(q[0], attention_mask=q[1]).text_embeds
    ep = model(p[0], attention_mask=p[1]).text_embeds
    labels = mx.arange(eq.shape[0])
    total = mx.array(0.0)
    for width in MATRYOSHKA:
        logits = (unit(eq[:, :width]) @ unit(ep[:, :width]).T) / temp
        both = nn.losses.cross_entropy(logits, labels) + nn.losses.cross_entropy(logits.T, labels)
        total = total + both.mean() / 2
    return total / len(MATRYOSHKA)


def top1(model: bert.Model, tok: Tokenizer, pairs: list[Pair], width: int = 64) -> float:
    """Share of questions whose own passage ranks first among all the pairs' passages."""
    eq = unit(embed(model, tok, [p.question for p in pairs])[:, :width])
    ep = unit(embed(model, tok, [p.passage for p in pairs])[:, :width])
    best = mx.argmax(eq @ ep.T, axis=1)
    return float((best == mx.arange(len(pairs))).mean().item())


def save(model: bert.Model, tok: Tokenizer, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    config = {**CONFIG, "vocab_size": tok.get_vocab_size()}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    tok.save(str(out / "tokenizer.json"))
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MAX_TOKENS,
        "do_lower_case": True,
        **{
            k: v
            for k, v in zip(
                ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"),
                SPECIALS,
                strict=True,
            )
        },
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--temperature", type=float, default=0.05)
    parser.add_argument("--countries-per-step", type=int, default=8)
    parser.add_argument("--vocab-size", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    mx.random.seed(args.seed)
    rng = random.Random(args.seed)
    train, _ = split_countries()
    tok = build_tokenizer(train, args.vocab_size)
    model = bert.Model(bert.ModelArgs.from_dict({**CONFIG, "vocab_size": tok.get_vocab_size()}))
    mx.eval(model.parameters())
    test = held_out(count=12)
    log.info("held-out top-1 untrained: %.3f", top1(model, tok, test))
    schedule = optim.join_schedules(
        [optim.linear_schedule(1e-5, args.lr, 50), optim.cosine_decay(args.lr, args.steps)], [50]
    )
    opt = optim.AdamW(learning_rate=schedule, weight_decay=0.01)
    step_fn = nn.value_and_grad(model, loss_fn)
    started = time.perf_counter()
    for step in range(1, args.steps + 1):
        pairs = batch(train, rng, args.countries_per_step)
        q = encode(tok, [p.question for p in pairs])
        p = encode(tok, [p.passage for p in pairs])
        loss, grads = step_fn(model, q, p, args.temperature)
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state, loss)
        if step % 100 == 0 or step == args.steps:
            log.info(
                "step %d loss %.3f held-out top-1 %s (%.0fs)",
                step,
                loss.item(),
                " ".join(f"{w}: {top1(model, tok, test, w):.3f}" for w in MATRYOSHKA),
                time.perf_counter() - started,
            )
    save(model, tok, args.out)
    log.info("saved to %s", args.out)


if __name__ == "__main__":
    main()
