"""A small draft model next to the served one, for speculative decoding inside the batch.

The batch generator sees both models as one (`DraftedModel`): its caches are the target's
layers followed by the draft's, so mlx-lm's prefill, prompt cache, merge, filter and extract
keep both in step without knowing there are two. The speculative batch calls each model on its
own part of the cache, and lets the draft's part lag behind on decode steps that do not draft.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_responses.service.config import ConfigError
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.model import LoadedModel, plain_caches

log = logging.getLogger(__name__)


class DraftModelError(ConfigError):
    """A draft model that cannot draft for the served one."""


def check_draft(target: LoadedModel, draft: LoadedModel) -> None:
    """Raises DraftModelError unless `draft` shares the target's tokenizer and has a KV cache."""
    ours, theirs = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if ours != theirs:
        missing = len(set(ours.items()) ^ set(theirs.items()))
        raise DraftModelError(
            f"--draft-model {draft.path} does not share the tokenizer of {target.path} "
            f"({len(theirs)} vs. {len(ours)} tokens, {missing} entries differ)"
        )
    for which in (target, draft):
        if not plain_caches(which.model):
            raise DraftModelError(
                f"--speculative draft needs plain KV caches; {which.path} has other layers"
            )


def paired_with_draft(
    loaded: LoadedModel, load_draft: Callable[[], LoadedModel] | None
) -> tuple[DraftedModel, Path]:
    """The served model paired with its draft model (loaded by `load_draft`, on the MLX
    thread), and the draft's folder (part of the disk tier's identity)."""
    if load_draft is None:
        raise DraftModelError("--speculative draft needs --draft-model")
    draft = load_draft()
    check_draft(loaded, draft)
    log.info("draft model %s drafts for %s", draft.path, loaded.alias)
    return DraftedModel(
        loaded.model, draft.model, loaded.vocab_size or len(loaded.tokenizer)
    ), draft.path


def _parameters(model: Any) -> int:
    weights: Any = tree_flatten(model.parameters())
    return sum(int(w.nbytes) for _, w in weights)


def _arrays(caches: list[Any]) -> list[Any]:
    return [(c.keys, c.values) for c in caches if c.keys is not None]


class DraftedModel:
    """The target model with its draft riding along: one call advances both caches.

    Returns the target's logits; the draft's are never evaluated (MLX is lazy), only the
    draft's cache updates are, queued with `async_eval` so they never pile up as a graph.
    """

    def __init__(self, target: Any, draft: Any, vocab_size: int) -> None:
        self.target = target
        self.draft = draft
        self.vocab_size = vocab_size  # draft logits are cut to the ids the target knows
        self.split = len(make_prompt_cache(target))
        self.layers = [*target.layers, *draft.layers]
        self._cost: float | None = None

    def cost_ratio(self) -> float:
        """What a draft forward costs next to a target forward: their weights' bytes, as a ratio."""
        if self._cost is None:
            self._cost = _parameters(self.draft) / max(1, _parameters(self.target))
        return self._cost

    def make_cache(self) -> list[Any]:
        return [*make_prompt_cache(self.target), *make_prompt_cache(self.draft)]

    def __call__(self, inputs: mx.array, cache: list[Any], **kwargs: Any) -> mx.array:
        self.draft_reads(inputs, cache, **kwargs)
        out: mx.array = self.target(inputs, cache=cache[: self.split], **kwargs)
        return out

    def draft_reads(self, inputs: mx.array, cache: list[Any], **kwargs: Any) -> None:
        """Advances the draft's cache over `inputs` (queued; its logits are never computed)."""
        self.draft(inputs, cache=cache[self.split :], **kwargs)
        mx.async_eval(_arrays(cache[self.split :]))

    def draft_logits(self, inputs: mx.array, cache: list[Any]) -> mx.array:
        """The draft's logits for the last position of `inputs`, over the target's ids."""
        logits: mx.array = self.draft(inputs, cache=cache[self.split :])
        return logits[:, -1, : self.vocab_size]
