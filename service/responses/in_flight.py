"""The running turns of every model, by response id: what a cancel (or a drain) reaches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from mlx_responses.service.stores.owned import OwnedMap

from mlx_responses.v1 import responses_pb2 as pb


@dataclass
class InFlight:
    """A running turn (compacting, then generating) and the final response it resolves to.

    `final` resolves to None when the turn fails before it generates.
    """

    stop: Callable[[], object]
    final: asyncio.Future[pb.Response | None]
    cancel_requested: bool = False


class InFlightTurns(OwnedMap[InFlight]):
    """One registry shared by the models' generators: a cancel needs no model.

    Another key's running turns are not in it (--isolate-keys: service/stores/owned.py).
    """

    async def cancel(self, response_id: str, timeout: float = 30.0) -> pb.Response | None:
        """Stops an in-flight turn and returns its final (cancelled) response.

        None if nothing runs under that id.
        """
        running = self.get(response_id)
        if running is None:
            return None
        running.cancel_requested = True
        running.stop()
        return await asyncio.wait_for(asyncio.shield(running.final), timeout)
