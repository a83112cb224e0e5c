"""What the async and sync clients share: channel options, metadata, request builders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlx_responses.v1 import responses_pb2 as pb

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Token streams end with the whole response in one message: allow what the core sends.
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
Metadata = Sequence[tuple[str, str]]


def text_params(model: str, text: str, **fields: Any) -> pb.CreateResponseParams:
    """CreateResponseParams for one user message of plain text (other fields as keywords)."""
    message = pb.MessageItem(
        role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text=text))]
    )
    return pb.CreateResponseParams(model=model, input=[pb.Item(message=message)], **fields)
