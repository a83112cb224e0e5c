"""A compaction item: its `encrypted_content` codec and what a replayed one stands for.

`encrypted_content` is base64url JSON (not encrypted). Pure: items in, items out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence

from google.protobuf import json_format

from mlx_responses.v1 import responses_pb2 as pb


class CompactionDecodeError(ValueError):
    """`encrypted_content` that is not a compaction this server wrote."""


def encode_compaction(summary: str, retained: Sequence[pb.Item]) -> str:
    """base64url JSON holding the summary and the retained items."""
    payload = {
        "summary": summary,
        "items": [json_format.MessageToDict(item) for item in retained],
    }
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_compaction(content: str) -> tuple[str, list[pb.Item]]:
    """The summary and retained items of `content`; raises CompactionDecodeError."""
    try:
        raw = base64.urlsafe_b64decode(content + "=" * (-len(content) % 4))
        payload = json.loads(raw)
        summary = payload["summary"]
        items = [json_format.ParseDict(d, pb.Item()) for d in payload.get("items", [])]
    except (
        binascii.Error,
        ValueError,
        KeyError,
        TypeError,
        json_format.ParseError,
    ) as exc:
        raise CompactionDecodeError("compaction encrypted_content is not valid") from exc
    if not isinstance(summary, str):
        raise CompactionDecodeError("compaction summary must be a string")
    for item in items:
        # A compaction this server wrote never nests one, and every item has a kind.
        if item.WhichOneof("item") in (None, "compaction"):
            raise CompactionDecodeError("compaction encrypted_content holds an invalid item")
    return summary, items


SYSTEM_ROLES = (pb.ROLE_SYSTEM, pb.ROLE_DEVELOPER)


def is_instruction(item: pb.Item) -> bool:
    """A system or developer message: compaction always keeps these verbatim."""
    return item.WhichOneof("item") == "message" and item.message.role in SYSTEM_ROLES


def effective_items(items: Sequence[pb.Item]) -> list[pb.Item]:
    """The items a context stands for once its latest compaction item is expanded.

    The latest compaction item replaces everything before it except system and developer
    messages: it becomes a summary-only compaction item followed by its retained items.
    Raises CompactionDecodeError for an `encrypted_content` this server cannot read.
    """
    last = None
    for index, item in enumerate(items):
        if item.WhichOneof("item") == "compaction":
            last = index
    if last is None:
        return list(items)
    compaction = items[last].compaction
    summary, retained = decode_compaction(compaction.encrypted_content)
    unit = pb.Item(
        compaction=pb.CompactionItem(
            id=compaction.id, encrypted_content=encode_compaction(summary, [])
        )
    )
    earlier = [item for item in items[:last] if is_instruction(item)]
    return [*earlier, unit, *retained, *items[last + 1 :]]
