"""A reasoning item's `encrypted_content`: the reasoning text, so a client that replays only
that field (Codex strips `content` on replay) still gives the model its reasoning back.

Like a compaction's, it is base64url JSON, not encrypted, and read as client data: an
`encrypted_content` this server did not write (OpenAI's) reads as no text. Pure.
"""

from __future__ import annotations

import base64
import binascii
import json

from mlx_responses.service.text.json_text import loads_bounded

from mlx_responses.v1 import responses_pb2 as pb

INCLUDE = "reasoning.encrypted_content"


def encode_reasoning(text: str) -> str:
    """base64url JSON holding the reasoning text."""
    raw = json.dumps({"reasoning": text}, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_reasoning(content: str) -> str:
    """The reasoning text of an `encrypted_content` this server wrote; else ""."""
    try:
        raw = base64.urlsafe_b64decode(content + "=" * (-len(content) % 4))
        payload = loads_bounded(raw)
    except (binascii.Error, ValueError, RecursionError):
        return ""
    text = payload.get("reasoning") if isinstance(payload, dict) else None
    return text if isinstance(text, str) else ""


def reasoning_text(item: pb.ReasoningItem) -> str:
    """What a reasoning item gives the model: its text, else its summary (a client that kept
    only that), else the text its `encrypted_content` carries."""
    text = "".join(p.text for p in item.content) or "".join(p.text for p in item.summary)
    if not text and item.HasField("encrypted_content"):
        text = decode_reasoning(item.encrypted_content)
    return text
