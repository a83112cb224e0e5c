"""Encodes and decodes a compaction item's `encrypted_content` (base64url JSON, not encrypted)."""

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
