"""ThinkingBudget: once a reasoning block has spent its budget, only the think-end token remains."""

from __future__ import annotations

import mlx.core as mx
from mlx_responses.service.engine.thinking_budget import ThinkingBudget

START, END, VOCAB = 3, 4, 10


def step(budget: ThinkingBudget, context: list[int]) -> list[bool]:
    """Which tokens stay possible after the processor, given the context so far."""
    out = budget(mx.array(context), mx.zeros((1, VOCAB)))
    return [bool(v) for v in (out[0] > -mx.inf).tolist()]


def test_forces_the_end_once_spent_and_resets_per_block() -> None:
    budget = ThinkingBudget(2, START, END, inside=True)
    context = [1, 2, START]  # the prompt opened the block
    assert all(step(budget, context))  # the prompt's token: nothing spent
    context.append(7)
    assert all(step(budget, context))  # 1 spent
    context.append(8)
    allowed = step(budget, context)  # 2 spent: only the end remains
    assert allowed == [i == END for i in range(VOCAB)]
    context.append(END)
    assert all(step(budget, context))  # closed: free again
    context.append(START)
    assert all(step(budget, context))  # a new block, a fresh budget
    context.append(9)
    assert all(step(budget, context))
    context.append(9)
    assert not step(budget, context)[9]


def test_outside_a_block_it_changes_nothing() -> None:
    budget = ThinkingBudget(0, START, END, inside=False)
    assert all(step(budget, [1]))
    assert all(step(budget, [1, 2]))
    assert step(budget, [1, 2, START]) == [i == END for i in range(VOCAB)]
