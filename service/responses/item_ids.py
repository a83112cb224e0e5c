"""Item ids that name the response (or conversation) holding them.

Every item a response holds gets an id, as OpenAI assigns them to input items too: `msg_...`,
`fc_...`, `fco_...`, `rs_...`. A generated id is `prefix_` + the 48 hex digits of the response
id + 8 random ones, so an `item_reference` to it finds its response in the store directly
(no separate item index to keep in step with the store's evictions).
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterable

from mlx_responses.service.responses.events import IdFactory, new_id
from mlx_responses.service.stores.transcript import item_id_of

from mlx_responses.v1 import responses_pb2 as pb

SCOPE_HEX = 48
SUFFIX_HEX = 8
ITEM_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
    "compaction": "cmp",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "shell_call": "sh",
    "shell_call_output": "sho",
    "local_shell_call": "lsh",
    "local_shell_call_output": "lsho",
    "apply_patch_call": "apc",
    "apply_patch_call_output": "apco",
}
_HEX = set(string.hexdigits.lower())


def scoped_id(prefix: str, scope_id: str) -> str:
    """A new id of kind `prefix` inside the response (or conversation) `scope_id`."""
    digits = scope_id.partition("_")[2]
    if len(digits) != SCOPE_HEX or not set(digits) <= _HEX:
        return new_id(prefix)  # a client-named scope: an unscoped id
    return f"{prefix}_{digits}{secrets.token_hex(SUFFIX_HEX // 2)}"


def scope_of(item_id: str, scope_prefix: str = "resp") -> str | None:
    """The id of the response (`resp`) or conversation (`conv`) a scoped item id names."""
    digits = item_id.partition("_")[2]
    if len(digits) != SCOPE_HEX + SUFFIX_HEX or not set(digits) <= _HEX:
        return None
    return f"{scope_prefix}_{digits[:SCOPE_HEX]}"


def scoped_ids(scope_id: str) -> IdFactory:
    """An id factory for the items of one response (other prefixes stay random)."""
    kinds = set(ITEM_PREFIX.values())

    def make(prefix: str) -> str:
        return scoped_id(prefix, scope_id) if prefix in kinds else new_id(prefix)

    return make


def assign_ids(items: Iterable[pb.Item], scope_id: str) -> None:
    """Gives every item without an id one (in place), scoped to `scope_id`."""
    for item in items:
        kind = item.WhichOneof("item")
        if kind in ITEM_PREFIX and not item_id_of(item):
            getattr(item, kind).id = scoped_id(ITEM_PREFIX[kind], scope_id)
