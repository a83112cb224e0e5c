"""A request's logits processors, each tagged with how to build it again (`replay`).

A processor changes the logits every step from state only it holds (a grammar's matcher, a
penalty's window, a reasoning budget's count). A distributed group's other ranks must apply the
same ones, so rank 0 sends each processor's spec (JSON) with its admission and they build their
own copies here (service/engine/distributed/lockstep.py); one process builds them here too, so
there is one way a request's processors come to be.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.penalties import penalty_processors
from mlx_responses.service.engine.requests import LogitsProcessor
from mlx_responses.service.engine.structured import GrammarProcessor
from mlx_responses.service.engine.thinking_budget import thinking_budget
from mlx_responses.service.text.grammars import Grammar, GrammarFactory

# The attribute every processor built here carries: its spec.
REPLAY = "replay"


def request_specs(
    loaded: LoadedModel,
    *,
    presence_penalty: float = 0.0,
    frequency_penalty: float = 0.0,
    grammar: Grammar | None = None,
    reasoning_budget: int | None = None,
    opens_reasoning: bool = False,
) -> list[list[Any]]:
    """The specs of a request's processors, in the order they apply.

    Penalties shift the logits first; a grammar's mask then has the last word. A reasoning
    budget applies only without a grammar (forcing think-end could contradict its mask), and
    only for a model whose think markers are single tokens.
    """
    specs: list[list[Any]] = []
    if presence_penalty:
        specs.append(["presence", presence_penalty])
    if frequency_penalty:
        specs.append(["frequency", frequency_penalty])
    if grammar is not None:
        specs.append(["grammar", grammar.source])
    elif reasoning_budget is not None and thinking_budget(
        loaded.tokenizer, reasoning_budget, inside=opens_reasoning
    ):
        specs.append(["think", reasoning_budget, opens_reasoning])
    return specs


def build_processors(
    specs: Sequence[Sequence[Any]],
    loaded: LoadedModel,
    grammars: GrammarFactory,
    compiled: Grammar | None = None,
) -> list[LogitsProcessor]:
    """The processors of `specs` (`request_specs`), each tagged with its spec; `compiled`: the
    grammar already compiled for the "grammar" spec (else compiled from its source)."""
    processors: list[LogitsProcessor] = []
    for spec in specs:
        kind = spec[0]
        processor: Any
        if kind == "presence":
            (processor,) = penalty_processors(float(spec[1]), 0.0)
        elif kind == "frequency":
            (processor,) = penalty_processors(0.0, float(spec[1]))
        elif kind == "grammar":
            grammar = compiled if compiled is not None else grammars.compiled(str(spec[1]))
            processor = GrammarProcessor(grammar.matcher, grammar.vocab_size)
        elif kind == "think":
            processor = thinking_budget(loaded.tokenizer, int(spec[1]), inside=bool(spec[2]))
        else:
            raise ValueError(f"unknown logits processor spec {kind!r}")
        setattr(processor, REPLAY, list(spec))
        processors.append(processor)
    return processors
