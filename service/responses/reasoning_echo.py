"""Remembers the reasoning behind each plain reply, to re-inject it when a client drops it.

Clients that replay history (Codex with store:false, say) often send the assistant message
without its reasoning item; rendering it back keeps the prompt identical to what was generated,
so the prompt cache still matches.

A reply is known by its text AND the item it answered (the last non-reasoning item before it,
ids aside): a short reply such as "hello" in another conversation, or another client's, is a
different reply and gets no reasoning that was never its own. With `--isolate-keys` a reply is
known within its API key only.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

from mlx_responses.service.ids import owned_name
from mlx_responses.service.stores.lru import BoundedLru

from mlx_responses.v1 import responses_pb2 as pb

# Entries are bounded by bytes; the entry cap only has to be out of the way.
MAX_ENTRIES = 1 << 30
UNIT_SEPARATOR = "\x1f"


def _reply_text(item: pb.Item) -> str | None:
    """An assistant message's text, or None for any other item."""
    if item.WhichOneof("item") != "message" or item.message.role != pb.ROLE_ASSISTANT:
        return None
    parts = item.message.content
    text = "".join(
        p.output_text.text if p.WhichOneof("part") == "output_text" else p.refusal.refusal
        for p in parts
    )
    return text or None


def _part_text(part: pb.ContentPart) -> str:
    kind = part.WhichOneof("part")
    return str(getattr(getattr(part, kind), "text", "")) if kind else ""


def _anchor(item: pb.Item | None) -> str:
    """What an item says, without the ids a replay may change: the turn a reply answered."""
    if item is None:
        return ""
    kind = item.WhichOneof("item")
    if kind == "message":
        texts = [_part_text(p) for p in item.message.content]
        return f"message:{item.message.role}:" + UNIT_SEPARATOR.join(texts)
    if kind == "function_call":
        return f"function_call:{item.function_call.name}:{item.function_call.arguments}"
    if kind == "function_call_output":
        return f"function_call_output:{item.function_call_output.output}"
    return kind or ""


def _reply_key(anchor: pb.Item | None, reply: pb.Item) -> str | None:
    text = _reply_text(reply)
    if text is None:
        return None
    # --isolate-keys: one key's reasoning is never put into another key's prompt.
    return owned_name(
        hashlib.sha256(f"{_anchor(anchor)}{UNIT_SEPARATOR}{text}".encode()).hexdigest()
    )


def _anchors(items: Sequence[pb.Item]) -> list[pb.Item | None]:
    """For each item, the last non-reasoning item before it (None for the first)."""
    anchors: list[pb.Item | None] = []
    last: pb.Item | None = None
    for item in items:
        anchors.append(last)
        if item.WhichOneof("item") != "reasoning":
            last = item
    return anchors


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

    def remember(self, context: Sequence[pb.Item], output: Sequence[pb.Item]) -> None:
        """Records every reasoning item that is directly followed by an assistant message.

        `context`: the turn's input (its last item is what the reply answered).
        """
        if not self.enabled:
            return
        items = [*context[-1:], *output]
        anchors = _anchors(items)
        for i, (before, after) in enumerate(itertools.pairwise(items), start=1):
            if before.WhichOneof("item") != "reasoning":
                continue  # only a reply right after reasoning is remembered (no key to hash)
            key = _reply_key(anchors[i], after)
            text = "".join(p.text for p in before.reasoning.content)
            if key is not None and text:
                self._lru.put(key, text, len(text.encode()) + len(key))

    def restore(self, items: Sequence[pb.Item]) -> list[pb.Item]:
        """The items with remembered reasoning put back before replies that lost it."""
        if not self.enabled:
            return list(items)
        out: list[pb.Item] = []
        for item, anchor in zip(items, _anchors(items), strict=True):
            key = _reply_key(anchor, item)
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
