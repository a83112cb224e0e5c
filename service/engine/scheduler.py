"""The seam between the worker and whatever decodes: the protocol every scheduler speaks.

The worker (worker.py) owns requests, streams, the prompt cache and delivery; a scheduler owns
sequences and their KV while they run. The worker admits a sequence (`Admission`), steps the
scheduler, drops what was cancelled, and reads counts and bytes; it chooses a scheduler by its
capabilities (`Scheduler.rewinds_any_window`, `speculates`), never by its class.

The schedulers, each in its own place and none importing another:
- `slots/`: ours, fixed KV slots per sequence (`--engine slots`);
- `batch/`: mlx-lm's BatchGenerator behind an adapter (`--engine batch`), the only code that
  reads mlx-lm's private names (listed in `batch/mlx_lm_compat.py`);
- `solo/`: one lone sequence decoded as mlx-lm's `generate_step` does, in front of either of
  them: it hands its sequence over when a second arrives and takes one back (`take_alone`).

Uids are the worker's: a sequence keeps its uid from admission to its end, whichever scheduler
holds it meanwhile.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import mlx.core as mx
from mlx_responses.service.engine.image_prompt import Deepstack, RowPositions, VisionInputs
from mlx_responses.service.engine.mlx_lm_compat import greedy_sampler

Sampler = Callable[[mx.array], mx.array]
LogitsProcessor = Callable[[mx.array, mx.array], mx.array]


@dataclass
class Admission:
    """A sequence to decode.

    `segments`: the prompt tokens still to feed (past what `cache` holds), cut where an entry is
    wanted (checkpoints: with `prompt_ends`, a scheduler hands back an entry at the end of each
    segment but the last, where the prompt is in but for its last token, and where it is in
    whole: its first token sampled, not yet fed).
    `embeddings`: the prompt's input embeddings in place of token ids for its positions
    (`[positions, hidden]`, aligned with the concatenated segments; a vision model's image
    features merged in), for a scheduler that `takes_embeddings`; None: token ids only.
    `positions`: its rotary positions where they are not each token's index (M-RoPE: a vision
    model's image prompt, `image_prompt.py`), absolute, for the same schedulers.
    `deepstack`: a Qwen3-VL image prompt's deepstack features of its image tokens past `cache`
    (`image_prompt.py`), for the same schedulers.
    `images`: an image prompt's processed images, for a scheduler that runs the vision tower
    itself (`vision/serial.py`, a family the slots do not batch); None otherwise.
    """

    uid: int
    segments: list[list[int]]
    max_tokens: int
    sampler: Sampler
    logits_processors: list[LogitsProcessor] = field(default_factory=list)
    cache: list[Any] | None = None  # a prompt-cache entry to start from (the scheduler's now)
    cached: list[int] = field(default_factory=list)  # the tokens `cache` holds
    speculate: bool = False  # its processors read the context alone (no grammar): it may draft
    # No other request arrived with it: it may decode alone (`solo/`).
    alone: bool = True
    embeddings: mx.array | None = None
    positions: RowPositions | None = None
    deepstack: Deepstack | None = None
    images: VisionInputs | None = None

    @property
    def prompt(self) -> list[int]:
        return [t for part in self.segments for t in part]


@dataclass
class Token:
    """One generated token of sequence `uid`; a finished one (`finish_reason` "stop" or
    "length") carries its prompt-cache entry (`prompt_cache`, `all_tokens`: the tokens it
    holds). `logprobs` (the step's log probabilities) may be unevaluated: computed where a
    request reads them (`sampled`). The first token a verify step emits for a sequence carries
    that verify's drafts proposed (`drafted`) and kept (`accepted`)."""

    uid: int
    token: int
    logprobs: mx.array
    finish_reason: str | None
    prompt_cache: list[Any] | None = None
    all_tokens: list[int] | None = None
    drafted: int = 0
    accepted: int = 0


@dataclass
class PromptEnd:
    """A prompt prefilled to a segment's end (a checkpoint), but for its last token, or whole
    (before its first token is fed): the prompt-cache entry there (a copy: the sequence goes
    on) and the tokens it holds. A sequence admitted from the middle of its decode (a solo
    sequence handed over) may end its "prompt" past the request's: the worker keeps only
    those within it."""

    uid: int
    cache: list[Any]
    tokens: list[int]


@dataclass
class StepResult:
    """What one step did: prompts that reached a segment's end (with `prompt_ends`), tokens
    generated (in order, several per sequence when drafts were accepted), and prompt tokens
    prefilled."""

    ends: list[PromptEnd] = field(default_factory=list)
    tokens: list[Token] = field(default_factory=list)
    prefilled: int = 0


@dataclass
class Alone:
    """A scheduler's only sequence, taken out to decode alone (`take_alone`).

    `pending` is its token sampled and not yet fed (nor sent), with that step's logprobs.
    """

    uid: int
    cache: list[Any]
    tokens: list[int]
    pending: tuple[mx.array, mx.array]
    sampler: Sampler
    max_tokens: int  # still to send


@dataclass
class SpeculationCounts:
    """What speculation did so far (the worker's stats read them)."""

    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_steps: int = 0


class Scheduler(Protocol):
    """What the worker drives, on the MLX thread only."""

    # Capabilities, fixed at construction.
    rewinds_any_window: bool  # a rejected draft is undone in rotating and mixed windows too
    speculates: bool  # admissions with `speculate` may draft
    takes_embeddings: bool  # admissions may carry `embeddings`
    # Settings the worker changes between steps.
    prefill_step_size: int  # a prompt's chunk per step (fair prefill sets it)
    prompt_ends: bool  # hand back entries at segment ends (`StepResult.ends`)

    @property
    def stream(self) -> Any:
        """The MLX stream the steps run on (a sequence decoded alone runs there too)."""
        ...

    def admit(self, admission: Admission) -> None:
        """Queues a sequence; it prefills and decodes in the steps that follow. Raises
        ValueError for what it cannot hold (an empty prompt)."""
        ...

    def step(self) -> StepResult:
        """Admits waiting prompts, prefills a chunk of each, decodes one token per sequence."""
        ...

    def drop(self, uids: Sequence[int]) -> None:
        """Forgets these sequences (cancelled); unknown uids are ignored."""
        ...

    def extract(self, uids: Sequence[int]) -> dict[int, tuple[list[Any], list[int]]]:
        """A copy of each held sequence's cache as a prompt-cache entry, with its tokens (the
        sequences go on); uids not held or not prefilled yet are left out."""
        ...

    def take_alone(self) -> Alone | None:
        """Its only sequence, removed, when it decodes unconstrained and nothing waits; else
        None (a scheduler that never hands one out always says None)."""
        ...

    @property
    def nbytes(self) -> int:
        """Bytes its live sequences' KV holds (counted against the prompt cache's budget)."""
        ...

    @property
    def waiting(self) -> int:
        """Sequences admitted and not decoding yet (queued or prefilling)."""
        ...

    @property
    def decoding(self) -> int:
        """Sequences decoding."""
        ...

    @property
    def speculation(self) -> SpeculationCounts | None:
        """What speculation did so far; None when this scheduler does not speculate."""
        ...

    def close(self) -> None:
        """Drops every sequence and the memory held for them."""
        ...


def sampled(sampler: Sampler, logits: mx.array) -> tuple[mx.array, mx.array]:
    """`sampler`'s tokens for `logits` (`[rows, vocabulary]`) and their log probabilities.

    A greedy sampler's tokens are the argmax of the logits (the log-softmax's): the log
    probabilities are then left unevaluated, computed only where a request reads them, where
    every step would otherwise take an exp per vocabulary id and row (0.05 ms a row on a
    3,456-id vocabulary, 2 CPU cores: a sixth of an 8-row step of the micro model). A step
    evaluates the tokens, not the log probabilities (other samplers read them: evaluated then).
    """
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    if sampler is greedy_sampler:
        return mx.argmax(logits, axis=-1), logprobs
    return sampler(logprobs), logprobs


def chunk_to(stops: Sequence[int], held: int, step: int) -> int:
    """A prefill chunk of at most `step` tokens for a sequence holding `held`, ending at the
    next of `stops` (segments' ends, where entries are taken) when one lies ahead."""
    ahead = [stop for stop in stops if stop > held]
    return min(step, min(ahead) - held) if ahead else step


def segments(prompt: list[int], splits: Sequence[int]) -> list[list[int]]:
    """A prompt as `Admission.segments` takes it: cut at each of `splits` that lies inside it
    (checkpoints: the prefill leaves an entry at each), else whole."""
    cuts = sorted({s for s in splits if 0 < s < len(prompt) - 1})
    bounds = [0, *cuts, len(prompt)]
    return [prompt[a:b] for a, b in itertools.pairwise(bounds)]
