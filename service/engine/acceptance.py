"""Which drafts of a sampled sequence a verify keeps: exact speculative sampling.

A verify scores a row's pending token and its drafts x_1..x_n in one forward; position j's
logits give p_j, the distribution the row's sampler would draw the token after column j from
(its processors, then its filters and temperature: `RuleSampler.scaled`). The kept drafts and
the token after them are distributed as tokens drawn one by one from p would be (Leviathan et
al. 2023, Chen et al. 2023):

- a draft model's drafts, each drawn from its own q_j (`draw_drafts`): x_{j+1} is kept with
  probability min(1, p_j(x)/q_j(x)); at the first refusal the token is drawn from
  norm(max(0, p_j - q_j)) instead, and when all n are kept the next is drawn from p_n;
- n-gram drafts, whose proposal is a point mass (q_j(x) = 1): a token y_j is drawn from p_j
  with the key the sampler would use for it, and x_{j+1} is kept when y_j == x_{j+1}. That keeps
  it with probability p_j(x) and, when refused, y_j is a draw from p_j without x, renormalized:
  the rule above for a point mass. A seeded row's tokens are then the very tokens it samples
  without drafting (one key per token either way), batch or not, drafting or not.

Everything here is lazy (one evaluation per verify, by the caller); `settle` reads the result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.seeded_sampler import RuleSampler

DRAFT, ACCEPT, RESIDUAL = 0, 1, 2  # the parts of a position's key (a draft model's rows)


def parts(key: mx.array | None) -> list[mx.array | None]:
    """A position's key split for its draft, acceptance and residual draws (None: global)."""
    if key is None:
        return [None, None, None]
    split = mx.random.split(key, 3)
    return [split[DRAFT], split[ACCEPT], split[RESIDUAL]]


def draw(scaled: mx.array, key: mx.array | None) -> mx.array:
    """One token from `scaled` ([vocabulary]), as the sampler draws it (a `[1, vocabulary]`
    categorical), as a `[1]` array."""
    return mx.random.categorical(scaled[None], key=key)


def draw_drafts(rule: RuleSampler, logits: mx.array, position: int) -> tuple[mx.array, mx.array]:
    """A draft model's token at draft `position` for a row sampled by `rule`, from the draft's
    `logits` ([vocabulary]): the token ([1]) and the log q it was drawn from ([vocabulary])."""
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    scaled = rule.scaled(logprobs[None])[0]
    log_q = scaled - mx.logsumexp(scaled, axis=-1, keepdims=True)
    key = parts(rule.keys(position + 1)[position])[DRAFT]
    return draw(scaled, key), log_q


def keep_draft(p_x: mx.array, q_x: mx.array, u: mx.array) -> mx.array:
    """Whether each draft is kept: u < min(1, p(x) / q(x)), u uniform on [0, 1)."""
    return u * q_x < p_x


def residual(p: mx.array, q: mx.array) -> mx.array:
    """What a refused draft's position draws from: max(0, p - q), unnormalized."""
    return mx.maximum(p - q, 0.0)


@dataclass
class Verdict:
    """A row's verify, lazily: `drawn[j]` the token position j emits when its draft is refused
    (j = n: the token after n kept drafts); `keep[j]` whether draft x_{j+1} is kept (None: when
    it equals `drawn[j]`, the point-mass rule)."""

    drawn: mx.array
    keep: mx.array | None


def point_mass(scaled: mx.array, keys: list[mx.array | None]) -> Verdict:
    """n-gram drafts: y_j drawn from p_j with position j's key (`scaled`: [n + 1, vocabulary])."""
    if keys[0] is None:
        return Verdict(mx.random.categorical(scaled), None)
    return Verdict(mx.concatenate([draw(s, k) for s, k in zip(scaled, keys, strict=True)]), None)


def judge(
    scaled: mx.array,
    drafts: mx.array | list[int],
    log_q: mx.array | None,
    keys: list[mx.array | None],
) -> Verdict:
    """A row's verdict: `scaled` [n + 1, vocabulary] the target's logits (p_j their softmax),
    `drafts` the n drafts, `log_q` [n, vocabulary] the log q each was drawn from (None: a
    point mass), `keys` the row's next n + 1 draw keys. Unseeded (`keys` None), any leading
    dimensions are rows judged at once (`scaled` [..., n + 1, vocabulary])."""
    x = drafts if isinstance(drafts, mx.array) else mx.array(drafts, dtype=mx.uint32)
    n = x.shape[-1]
    if log_q is None or n == 0:
        return point_mass(scaled, keys)
    if log_q.shape[-1] < scaled.shape[-1]:  # a draft's logits cut to the target's ids
        pad = mx.full((*log_q.shape[:-1], scaled.shape[-1] - log_q.shape[-1]), -mx.inf)
        log_q = mx.concatenate([log_q, pad.astype(log_q.dtype)], axis=-1)
    p = mx.softmax(scaled[..., :n, :], axis=-1)
    q = mx.exp(log_q)
    p_x = mx.take_along_axis(p, x[..., None], axis=-1)[..., 0]
    q_x = mx.take_along_axis(q, x[..., None], axis=-1)[..., 0]
    split = [parts(k) for k in keys[:n]]
    if keys[0] is None:
        u = mx.random.uniform(shape=p_x.shape)
    else:
        u = mx.concatenate([mx.random.uniform(shape=(1,), key=s[ACCEPT]) for s in split])
    rest = residual(p, q)
    # A position whose p equals q (no residual) never refuses: any draw serves there.
    rest = mx.where(rest.sum(axis=-1, keepdims=True) > 0, mx.log(rest), scaled[..., :n, :])
    if keys[0] is None:
        refused = mx.random.categorical(rest)
        last = mx.random.categorical(scaled[..., n:, :])
    else:
        refused = mx.concatenate([draw(r, s[RESIDUAL]) for r, s in zip(rest, split, strict=True)])
        last = draw(scaled[n], keys[n])
    return Verdict(mx.concatenate([refused, last], axis=-1), keep_draft(p_x, q_x, u))


def settle(verdict: Verdict, drafts: list[int]) -> tuple[int, int]:
    """(drafts kept, the token after them) of an evaluated verdict."""
    keep = None if verdict.keep is None else verdict.keep.tolist()
    return outcome(verdict.drawn.tolist(), keep, drafts)  # type: ignore[arg-type]


def outcome(drawn: list[int], keep: list[bool] | None, drafts: list[int]) -> tuple[int, int]:
    """(drafts kept, the token after them): drafts are kept up to the first refused one
    (`keep`, or for a point mass the first that differs from the token drawn there)."""
    kept = 0
    while kept < len(drafts) and (drawn[kept] == drafts[kept] if keep is None else keep[kept]):
        kept += 1
    return kept, drawn[kept]


def sampled_rule(sampler: object) -> RuleSampler | None:
    """The rule of a sampled row's sampler (None: greedy)."""
    return sampler if isinstance(sampler, RuleSampler) else None


def verdict(
    sampler: object, lp: mx.array, drafts: mx.array | list[int], log_q: mx.array | None
) -> Verdict:
    """A drafting row's verdict over its n + 1 positions (`lp`: the target's log
    probabilities there): a greedy row's draw is each position's argmax; a sampled row's is
    judged by its rule, with the keys its sampler would use."""
    rule = sampled_rule(sampler)
    if rule is None:
        return Verdict(mx.argmax(lp, axis=-1), None)
    return judge(rule.scaled(lp), drafts, log_q, rule.keys(lp.shape[0]))


def target_logprobs(
    logits: mx.array, processors: Sequence[Any], context: Callable[[int], mx.array]
) -> mx.array:
    """A drafting row's log probabilities at each verified position (`logits`: [n + 1,
    vocabulary]): its processors applied at position j over `context(j)` (the tokens before
    it, the column fed there included), as a decode step applies them, then normalized."""
    if processors:
        rows = []
        for j in range(logits.shape[0]):
            row = logits[j : j + 1]
            tokens = context(j)
            for processor in processors:
                row = processor(tokens, row)
            rows.append(row)
        logits = mx.concatenate(rows, axis=0)
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def next_drafts(
    logits: mx.array,
    rules: dict[int, RuleSampler],
    position: int,
    log_q: dict[int, list[mx.array]],
) -> mx.array:
    """A draft model's tokens ([rows], uint32) at draft `position` from its `logits` ([rows,
    vocabulary]): each row's argmax, but a row in `rules` (sampled) draws from its rule over
    them, the log q it drew from appended to `log_q[row]`."""
    tokens = mx.argmax(logits, axis=-1).astype(mx.uint32)
    if not rules:
        return tokens
    drawn = []
    for row, rule in rules.items():
        token, q = draw_drafts(rule, logits[row], position)
        log_q.setdefault(row, []).append(q)
        drawn.append(token)
    tokens[mx.array(list(rules))] = mx.concatenate(drawn).astype(mx.uint32)
    return tokens
