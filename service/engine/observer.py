"""What the engine reports as it runs, to whoever watches (the core's Prometheus metrics).

The engine defines the protocol and knows nothing of its implementation, so the MLX thread
imports no service module above it; service/metrics.py satisfies it.
"""

from __future__ import annotations

from typing import Protocol


class ModelObserver(Protocol):
    """Reports of one model's engine; called on the engine thread, so they must be cheap."""

    def prompt(self, tokens: int, cached: int) -> None:
        """A prompt was admitted: its length and how many of its tokens the cache held."""

    def token(self, since_previous: float, first: bool) -> None:
        """A token was generated, `since_previous` seconds after the last (or the submission)."""

    def drafted(self, proposed: int, accepted: int) -> None:
        """A verify step proposed `proposed` draft tokens for a request and kept `accepted`."""

    def finished(self, reason: str, elapsed: float) -> None:
        """A request ended (`stop`, `length`, `cancelled`, `error`) after `elapsed` seconds."""

    def waited(self, seconds: float) -> None:
        """A request waited `seconds` in the queue for memory (--memory-limit) before it ran."""

    def refused(self, reason: str) -> None:
        """A request was refused before it ran: `memory` (a 400) or `queue_full` (a 503)."""

    def engine_failed(self, outcome: str) -> None:
        """The engine's loop failed: `restarted` (it went on) or `stopped` (it gave up)."""


class EngineObserver(Protocol):
    """Hands each loaded model its observer."""

    def for_model(self, model_name: str) -> ModelObserver:
        """The observer of the model served under `model_name`."""
