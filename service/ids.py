"""Ids as OpenAI writes them: a type prefix (`resp`, `msg`, `fc`, `rs`, `cmp`) and random hex.

With `--isolate-keys` a response id also names its owner: the RPC's API key, bound to
`OWNER` as its SHA-256 (a key is never kept in plain). The id's last 16 hex digits are a tag
of the owner and the random part, so only the key that made a response passes `owns(id)`; any
other key is told the id does not exist. Nothing is stored: every replica checks the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from contextvars import ContextVar

# Tests pass a counter instead, for stable ids.
IdFactory = Callable[[str], str]

# The owner of the RPC being served (None: keys are not isolated). Tasks an RPC starts, such
# as its background job, inherit it.
OWNER: ContextVar[str | None] = ContextVar("response_owner", default=None)
OWNED_PREFIX = "resp"
_ID_HEX = 48
_TAG_HEX = 16


def owner_of(api_key: str) -> str:
    """The owner an API key stands for: its SHA-256, hex."""
    return hashlib.sha256(api_key.encode()).hexdigest()


def _tag(owner: str, body: str) -> str:
    return hashlib.sha256(f"{owner}:{body}".encode()).hexdigest()[:_TAG_HEX]


def new_id(prefix: str) -> str:
    """An OpenAI-looking id: `prefix_` and 48 hex digits (a response's tagged by its owner)."""
    owner = OWNER.get()
    if owner is None or prefix != OWNED_PREFIX:
        return f"{prefix}_{secrets.token_hex(_ID_HEX // 2)}"
    body = secrets.token_hex((_ID_HEX - _TAG_HEX) // 2)
    return f"{prefix}_{body}{_tag(owner, body)}"


def owns(response_id: str) -> bool:
    """Whether the current owner made `response_id` (always, when keys are not isolated)."""
    owner = OWNER.get()
    if owner is None:
        return True
    digits = response_id.removeprefix(f"{OWNED_PREFIX}_")
    if len(digits) != _ID_HEX:
        return False
    body, tag = digits[:-_TAG_HEX], digits[-_TAG_HEX:]
    return hmac.compare_digest(tag.encode(), _tag(owner, body).encode())


def owned_name(name: str) -> str:
    """A client-chosen name (a conversation id) in the current owner's namespace."""
    owner = OWNER.get()
    return name if owner is None else f"{owner}:{name}"
