"""What drafts for a served model, chosen once at its load: a draft model or a drafting head of
a --draft-model folder (`--speculative draft`), the checkpoint's own MTP head (where it ships
one: Qwen3.5's `mtp.*`, DeepSeek-V3's or GLM-4.5's last layer; in place of n-gram drafts,
`--speculative ngram`, the default: unless --no-mtp), or nothing new (n-gram drafts, or none:
`--speculative off`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlx_responses.service.engine.deepseek_mtp import load_deepseek_mtp
from mlx_responses.service.engine.draft_folder import head_kind, load_head
from mlx_responses.service.engine.draft_model import paired_with_draft
from mlx_responses.service.engine.heads import HeadedModel
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.mtp import load_mtp

log = logging.getLogger(__name__)


@dataclass
class Drafting:
    """The model the scheduler calls (paired with its drafter, or as it was) and how it
    speculates (`--speculative`'s value, or a head's kind: "mtp", "eagle3", "dflash")."""

    model: Any
    speculative: str
    weights: Any = None  # the drafter's module (its weights in the memory account)
    draft_path: Path | None = None  # a draft model's folder (part of the disk tier's identity)
    head: str | None = None  # a head's kind (and folder): part of the disk tier's identity


def choose(
    loaded: LoadedModel,
    model: Any,
    *,
    speculative: str,
    mtp: bool,
    draft_folder: Path | None,
    load_draft: Callable[[], LoadedModel] | None,
) -> Drafting:
    """`model` (the served model's batched side) with what drafts for it; `mtp`: whether its
    checkpoint's own MTP head may draft in place of n-gram drafts (--no-mtp not given,
    `--speculative ngram` asked, and a model whose batch can hold the head)."""
    if speculative == "draft" and head_kind(draft_folder) is not None:
        assert draft_folder is not None
        vocab = loaded.vocab_size or len(loaded.tokenizer)
        headed = load_head(model, draft_folder, vocab)
        return _headed(headed, f"{headed.kind}:{draft_folder}")
    if speculative == "draft":
        pair, path = paired_with_draft(loaded, load_draft)
        return Drafting(pair, speculative, pair.draft, draft_path=path)
    if mtp and speculative != "draft":
        paired = load_deepseek_mtp(model, loaded.path) or load_mtp(model, loaded.path)
        if paired is not None:
            return _headed(paired, paired.kind)
    return Drafting(model, speculative)


def _headed(headed: HeadedModel, identity: str) -> Drafting:
    return Drafting(headed, headed.kind, headed.head, head=identity)
