"""A request's fan-out: the core calls of one HTTP request's choices (prompts x `n`).

The façade makes one core call per choice (http_facade/relay.py); each carries `x-fan-out:
<group>/<size>` metadata, so the core admits the group as one unit against its queue
(`--max-queued-requests`): the first call of a group to arrive is admitted when the queue
has room and reserves the whole group, whose other calls then pass. A request's shape alone
never fills the queue; only real load does. Stdlib only: the façade imports it too.
"""

from __future__ import annotations

import re
from contextvars import ContextVar

METADATA_KEY = "x-fan-out"
MAX_SIZE = 256  # calls in one group at most: 16 prompts x n of 16
# Seconds a group's reservation waits for its other calls (a client gone mid-fan-out, a call
# refused before admission): then what is left of it is given back.
WAIT_SECS = 30.0
_VALUE = re.compile(r"([A-Za-z0-9_-]{1,64})/([0-9]{1,3})")

# The fan-out of the RPC being served (group, size), None for a lone call.
FAN_OUT: ContextVar[tuple[str, int] | None] = ContextVar("fan_out", default=None)


def fan_out_value(group: str, size: int) -> str:
    """The metadata value of one call of a group of `size` calls."""
    return f"{group}/{size}"


def parse_fan_out(value: str) -> tuple[str, int] | None:
    """(group, size) from a metadata value; None where it is malformed or not a group."""
    match = _VALUE.fullmatch(value)
    if match is None:
        return None
    size = int(match.group(2))
    return (match.group(1), size) if 1 < size <= MAX_SIZE else None
