"""Which core should serve a request: the one that most likely holds its prompt in cache.

A request's affinity key names what its prompt starts with, so that every turn of one agent
session, on every façade, maps to the same core (rendezvous hashing in core_pool.py):

1. `prompt_cache_key`, the client's own name for a reusable prefix;
2. `conversation`, whose transcript every turn starts with;
3. `previous_response_id`: the key the chain's first turn was routed by, when this façade
   routed it (a bounded memo), else the id itself;
4. the prompt's start: instructions, tools and the first input item (a chat-style client sends
   the whole history each turn, so its first item does not change).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from mlx_responses.v1 import responses_pb2 as pb

MEMO_ENTRIES = 65_536  # response id -> key: a few MB at most


def _digest(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


class Affinity:
    """Affinity keys of requests, and the memo that carries a key along a response chain."""

    def __init__(self, entries: int = MEMO_ENTRIES) -> None:
        self._entries = entries
        self._memo: OrderedDict[str, str] = OrderedDict()

    def key(self, params: pb.CreateResponseParams) -> str:
        """The affinity key of a create (or count) request."""
        model = params.model.encode()
        if params.HasField("prompt_cache_key") and params.prompt_cache_key:
            return "key:" + _digest(model, params.prompt_cache_key.encode())
        if params.HasField("conversation") and params.conversation:
            return "conversation:" + params.conversation
        if params.HasField("previous_response_id") and params.previous_response_id:
            previous = params.previous_response_id
            known = self._memo.get(previous)
            if known is not None:
                self._memo.move_to_end(previous)
                return known
            return "response:" + previous
        start = [model, params.instructions.encode()]
        start += [tool.SerializeToString(deterministic=True) for tool in params.tools]
        if params.input:
            start.append(params.input[0].SerializeToString(deterministic=True))
        elif params.HasField("prompt"):
            start.append(params.prompt.encode()[:4096])
        return "prefix:" + _digest(*start)

    def remember(self, response_id: str, key: str) -> None:
        """A response created under `key`: its follow-ups go where it went."""
        if not response_id:
            return
        self._memo[response_id] = key
        self._memo.move_to_end(response_id)
        while len(self._memo) > self._entries:
            self._memo.popitem(last=False)
