"""A drafting head that reads the target's hidden states, riding along with the target.

An MTP head (the checkpoint's own, `mtp.py`) and an EAGLE-3 head (a drafter folder,
`eagle3.py`) both read, at position p, features of the target's hidden states at p (its last
hidden state; three of its layers' outputs) and the embedding of the token at p + 1, and predict
the token at p + 2; they attend over their own earlier positions (a KV cache per head layer)
and draft further from their own hidden states. `HeadedModel` is the target with such a head,
as `draft_model.DraftedModel` is for a draft model: its caches are the target's, then the
head's, then one `ArraysCache` holding each row's last features (what the head reads next), so
mlx-lm's prefill, prompt cache, merge, filter and extract keep all three in step. Every target
forward over positions n..n+L-1 has the head read positions n-1..n+L-2 (the features kept from
the last forward, then this one's), so the head's caches always hold as many positions as the
target's (its first one reads zero features) and a rejected draft trims both alike
(`batch/speculative.py`).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_responses.service.engine.acceptance import next_drafts
from mlx_responses.service.engine.mlx_lm_compat import ArraysCache, KVCache, make_prompt_cache
from mlx_responses.service.engine.seeded_sampler import RuleSampler


def _embedding(target: Any) -> Any:
    """The target's token embedding (an mlx-lm model's, or a vision model's language side's)."""
    inner = getattr(target, "inner", None)
    if inner is None:
        inner = getattr(target, "language_model", target).model
    return inner.embed_tokens


def _parameters(module: Any) -> int:
    weights: Any = tree_flatten(module.parameters())
    return sum(int(w.nbytes) for _, w in weights)


class HeadedModel:
    """The target with a drafting head riding along: one call advances the target's caches
    and the head's (their arrays queued with `async_eval`; the head's logits are never
    computed there). Returns the target's logits.

    A kind of head says how the target's features are taken (`forward`), how the head reads
    them (`draft_hidden`) and what it predicts (`draft_logits`)."""

    kind = ""

    def __init__(self, target: Any, head: Any, features: int) -> None:
        """`features`: the width of the features the head reads."""
        self.target = target
        self.head = head
        self.features = features
        self._embed = _embedding(target)
        self.split = len(make_prompt_cache(target))  # the first head cache
        self.layers = [*target.layers, *head.layers]
        self._cost: float | None = None

    def cost_ratio(self) -> float:
        """A draft position's cost next to a target forward: their weights' bytes, as a ratio
        (the head's own, not the target's embeddings it shares)."""
        if self._cost is None:
            target = getattr(self.target, "language", self.target)  # a VLM's: its text side
            self._cost = _parameters(self.head) / max(1, _parameters(target))
        return self._cost

    def __getattr__(self, name: str) -> Any:
        """A vision model's language side takes its rows' inputs beyond token ids (`enter`,
        `leave`, `feed`: `vision/hybrid.py`, `batch/feed.py`): said to the target."""
        if name in ("enter", "leave", "feed"):
            return getattr(self.target, name)
        raise AttributeError(name)

    def make_cache(self) -> list[Any]:
        head = [KVCache() for _ in self.head.layers]
        return [*make_prompt_cache(self.target), *head, ArraysCache(1)]

    def forward(self, inputs: mx.array, cache: list[Any]) -> tuple[mx.array, mx.array]:
        """The target over `inputs`: its logits and the features the head reads."""
        raise NotImplementedError

    def draft_hidden(self, tokens: mx.array, features: mx.array, cache: list[Any]) -> mx.array:
        """The head over `tokens` with the features (or its own hidden states) before them:
        writes its caches, returns its hidden states."""
        raise NotImplementedError

    def draft_logits(self, hidden: mx.array) -> mx.array:
        """The head's logits over the target's ids, from its hidden states."""
        raise NotImplementedError

    def __call__(self, inputs: mx.array, cache: list[Any], **kwargs: Any) -> mx.array:
        logits, features = self.forward(inputs, cache)
        self.read(inputs, features, cache)
        return logits

    def read(self, inputs: mx.array, features: mx.array, cache: list[Any]) -> None:
        """The head reads the positions of a target forward over `inputs` (`read_positions`),
        and keeps each row's last features (a right-padded prefill's: its last real
        position's)."""
        kept = cache[-1]
        rows, width = inputs.shape[0], inputs.shape[1]
        before = self.kept(cache, rows)
        self.read_positions(inputs, features, before, cache)
        last = features[:, -1:]
        if kept.lengths is not None:  # a right-padded prefill chunk: rows end where they do
            ends = kept.lengths
            at = mx.clip(ends - 1, 0, width - 1)[:, None, None]
            picked = mx.take_along_axis(features, at, axis=1)
            last = mx.where((ends > 0)[:, None, None], picked, before)
            kept.advance(width)
        kept[0] = last
        mx.async_eval(last, [(c.keys, c.values) for c in self.head_caches(cache)])

    def read_positions(
        self, inputs: mx.array, features: mx.array, before: mx.array, cache: list[Any]
    ) -> None:
        """The head reads the positions before `inputs`: the kept features (`before`), then
        these but their last."""
        self.draft_hidden(inputs, mx.concatenate([before, features[:, :-1]], axis=1), cache)

    def read_verified(self, inputs: mx.array, features: mx.array, cache: list[Any]) -> None:
        """After drafting from the pending token (the head read its position then), the head
        reads the drafts' positions from a verify's features."""
        if inputs.shape[1] > 1:
            self.draft_hidden(inputs[:, 1:], features[:, :-1], cache)

    def drafts(
        self,
        pending: mx.array,
        width: int,
        cache: list[Any],
        rules: dict[int, RuleSampler],
        log_q: dict[int, list[mx.array]],
    ) -> list[mx.array]:
        """`width` draft tokens after each row's pending token ([rows] each, lazy): one head
        forward per position, from the kept features, then its own hidden states; greedy but
        for the rows in `rules`, which draw from their rule over the head's logits (the log
        q of each appended to `log_q`). The head's caches keep the pending token's position
        only (the one a step without drafts reads): the verify reads the drafts' positions
        again, from the target's features."""
        columns = []
        token = pending[:, None]
        hidden = self.kept(cache, pending.shape[0])
        for j in range(width):
            hidden = self.draft_hidden(token, hidden, cache)
            logits = self.draft_logits(hidden)[:, -1, :]
            token = next_drafts(logits, rules, j, log_q)[:, None]
            columns.append(token)
        if width > 1:
            for c in self.head_caches(cache):
                c.trim(width - 1)
        return columns

    def head_caches(self, cache: list[Any]) -> list[Any]:
        return cache[self.split : -1]

    def kept(self, cache: list[Any], rows: int) -> mx.array:
        """Each row's kept features ([rows, 1, features]; zeros for a row that has none)."""
        held = cache[-1][0]
        if held is None or held.shape[0] != rows:
            return mx.zeros((rows, 1, self.features), dtype=self._embed.weight.dtype)
        return held

    def keep(self, cache: list[Any], features: mx.array, kept: list[int]) -> None:
        """After a verify over `features`' positions: each row keeps its features at its last
        kept position (`kept[i]` positions kept)."""
        at = mx.array([n - 1 for n in kept])[:, None, None]
        cache[-1][0] = mx.take_along_axis(features, at, axis=1)

    def embed(self, tokens: mx.array) -> mx.array:
        out: mx.array = self._embed(tokens)
        return out
