"""What the slot scheduler holds of each sequence, and a decode step's rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx


@dataclass
class SlotSequence:
    uid: int
    pending: list[int]  # prompt tokens not prefilled yet, the last one excepted
    last: int  # the last prompt token: the decode step feeds it
    tokens: list[int]  # tokens whose keys are in the slot
    max_tokens: int
    sampler: Any
    processors: list[Any]
    cache: list[Any] | None  # a prompt-cache entry to start from (copied into the slot)
    # Token counts where a prefill chunk ends (segments' ends: `PromptEnd`).
    stops: tuple[int, ...] = ()
    slot: int = -1
    generated: int = 0
    ready: bool = False  # prefilled: a token waits to be fed (the last prompt one, or sampled)
    drafted_to: int = 0  # with a draft model: the positions its slot holds (it lags the target)


@dataclass
class DecodeRows:
    """A decode step's rows: the sequences with a token to feed (sampled ones first, then those
    feeding their last prompt token)."""

    named: list[tuple[int, int]]  # (slot, uid) of each row
    rows: list[SlotSequence]
    current: mx.array  # each row's token to feed
    current_lp: mx.array | None  # the logprobs of the first `sampled` rows' tokens
    sampled: int  # rows that sampled their token (the rest feed their last prompt token)
    inputs: mx.array  # `current` scattered over the slots up to the highest in use
    lengths: list[int]  # the tokens each of those slots holds

    @property
    def slots(self) -> list[int]:
        return [slot for slot, _ in self.named]


def arrival(seq: SlotSequence) -> int:
    return seq.uid
