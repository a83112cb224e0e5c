"""Ids as OpenAI writes them: a type prefix (`resp`, `msg`, `fc`, `rs`, `cmp`) and random hex."""

from __future__ import annotations

import secrets
from collections.abc import Callable

# Tests pass a counter instead, for stable ids.
IdFactory = Callable[[str], str]


def new_id(prefix: str) -> str:
    """An OpenAI-looking id: `prefix_` and 48 hex digits."""
    return f"{prefix}_{secrets.token_hex(24)}"
