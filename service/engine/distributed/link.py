"""What the engine asks of its lockstep link (lockstep.py implements it): the worker reads its
commands through it, so that every rank of a group runs the same ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Lockstep(Protocol):
    """One rank's end of the lockstep: rank 0 sends (`follows` false), the others receive."""

    follows: bool

    @property
    def heartbeat(self) -> float:
        """Seconds an idle rank 0 waits for a command before it sends an empty message: a
        moment before it parks the other ranks, then its heartbeat (so they know it is
        alive)."""
        ...

    def send(
        self, commands: Sequence[Any], alone: bool, stream: Any, busy: bool = True
    ) -> tuple[list[Any], bool]:
        """Rank 0: posts the commands its engine read this iteration, and its solo decision, to
        every rank, queued on `stream` (the scheduler's) before the step; returns what every
        rank runs now (what it posted last iteration). `busy`: the engine has work (idle, the
        link may park the other ranks)."""
        ...

    def receive(self, stream: Any) -> tuple[list[Any], bool]:
        """Another rank: the commands rank 0 runs now, and its solo decision."""
        ...
