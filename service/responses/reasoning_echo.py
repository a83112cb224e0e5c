"""Remembers the reasoning behind each plain reply, to re-inject it when a client drops it.

Clients that replay history (Codex with store:false, say) often send the assistant message
without its reasoning item; rendering it back keeps the prompt identical to what was generated,
so the prompt cache still matches.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

from mlx_responses.service.stores.lru import BoundedLru

from mlx_responses.v1 import responses_pb2 as pb

# Entries are bounded by bytes; the entry cap only has to be out of the way.
MAX_ENTRIES = 1 << 30


def _message_key(item: pb.Item) -> str | None:
    if item.WhichOneof("item") != "message" or item.message.role != pb.ROLE_ASSISTANT:
        return None
    parts = item.message.content
    text = "".join(
        p.output_text.text if p.WhichOneof("part") == "output_text" else p.refusal.refusal
        for p in parts
    )
    return hashlib.sha256(text.encode()).hexdigest() if text else None


class ReasoningEcho:
    """A byte-bounded LRU from assistant reply text to the reasoning that preceded it."""

    def __init__(self, max_bytes: int) -> None:
        self._lru: BoundedLru[str] = BoundedLru(MAX_ENTRIES if max_bytes > 0 else 0, max_bytes, 0)

    @property
    def enabled(self) -> bool:
        return self._lru.enabled

    @property
    def bytes(self) -> int:
        return self._lru.bytes

    def remember(self, output: Sequence[pb.Item]) -> None:
        """Records every reasoning item that is directly followed by an assistant message."""
        if not self.enabled:
            return
        for before, after in itertools.pairwise(output):
            key = _message_key(after)
            if key is not None and before.WhichOneof("item") == "reasoning":
                text = "".join(p.text for p in before.reasoning.content)
                if text:
                    self._lru.put(key, text, len(text.encode()) + len(key))

    def restore(self, items: Sequence[pb.Item]) -> list[pb.Item]:
        """The items with remembered reasoning put back before replies that lost it."""
        if not self.enabled:
            return list(items)
        out: list[pb.Item] = []
        for item in items:
            key = _message_key(item)
            previous = out[-1].WhichOneof("item") if out else None
            if key is not None and previous != "reasoning":
                text = self._lru.get(key)
                if text is not None:
                    out.append(
                        pb.Item(
                            reasoning=pb.ReasoningItem(
                                content=[pb.ReasoningText(text=text)],
                                status=pb.ITEM_STATUS_COMPLETED,
                            )
                        )
                    )
            out.append(item)
        return out
