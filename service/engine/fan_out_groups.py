"""Fan-out groups admitted as one unit (service/fan_out.py): the share of the in-flight count
each group reserved for its calls still to come. Used under the engine's admission lock."""

from __future__ import annotations

import time
from collections.abc import Callable

from mlx_responses.service.fan_out import WAIT_SECS


class FanOutGroups:
    """Per group: its calls still to come, and until when they are waited for."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._left: dict[str, tuple[int, float]] = {}

    def reserve(self, group: str, size: int) -> int:
        """The group's first call is admitted: the whole group counts in flight from now
        (returns what to add to the count: `size`)."""
        if size > 1:
            self._left[group] = (size - 1, self._clock() + WAIT_SECS)
        return size

    def take(self, group: str) -> bool:
        """Whether a call of `group` is admitted on its group's reservation (counted)."""
        left = self._left.get(group)
        if left is None:
            return False
        if left[0] <= 1:
            del self._left[group]
        else:
            self._left[group] = (left[0] - 1, left[1])
        return True

    def holds(self, group: str) -> bool:
        return group in self._left

    def expire(self) -> int:
        """Gives back what groups past their wait still reserve (returns it, to subtract)."""
        now = self._clock()
        late = [g for g, (_, until) in self._left.items() if until <= now]
        return sum(self._left.pop(g)[0] for g in late)
