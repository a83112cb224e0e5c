"""The seam between the engine and its lockstep link (lockstep.py implements it): what the
worker asks of the link (it reads its commands through it, so that every rank of a group runs
the same ones), and what the link asks of the engine it serves (`Engine`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from mlx_responses.service.engine.stream import Cancels


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


class Engine(Cancels, Protocol):
    """The engine a link serves (the worker): its streams' requests are dropped through it
    (`cancel`), and it refuses new requests once the group is lost (`alive` false)."""

    alive: bool
