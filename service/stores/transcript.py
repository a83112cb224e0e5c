"""What a conversation transcript holds besides its items: the conversation object (header).

A transcript is its header, then its items. Backends that keep serialized entries (Redis lists)
store the header as the first entry, marked by a leading zero byte: no serialized Item starts
with one (field number 0 is invalid in protobuf), so the two never mix up, and a transcript
written before conversation objects existed (no header) still reads.
"""

from __future__ import annotations

import time

from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st

HEADER_MARK = b"\x00"


def new_info(
    conversation_id: str, metadata: dict[str, str] | None = None, created_at: int | None = None
) -> st.ConversationObject:
    """A conversation object created now (wall clock)."""
    return st.ConversationObject(
        id=conversation_id,
        created_at=int(time.time()) if created_at is None else created_at,
        metadata=metadata or {},
    )


def encode_header(info: st.ConversationObject) -> bytes:
    """The header entry of a serialized transcript."""
    return HEADER_MARK + info.SerializeToString()


def is_header(raw: bytes) -> bool:
    """Whether a serialized transcript entry is the header."""
    return raw[:1] == HEADER_MARK


def decode_header(raw: bytes) -> st.ConversationObject:
    """The conversation object of a header entry."""
    return st.ConversationObject.FromString(raw[len(HEADER_MARK) :])


def header_bytes(info: st.ConversationObject) -> int:
    """What a header counts against the byte budget (its serialized size)."""
    return len(HEADER_MARK) + info.ByteSize()


def item_id_of(item: pb.Item) -> str:
    """The id an item carries ('' if none)."""
    kind = item.WhichOneof("item")
    if kind is None:
        return ""
    return str(getattr(getattr(item, kind), "id", ""))  # a compaction_trigger has none
