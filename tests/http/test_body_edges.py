"""Bodies the API fuzzer found accepted though the document forbids them."""

from __future__ import annotations

import httpx
import pytest

from tests.support.stack import Stack


@pytest.mark.parametrize("body", [b"\x0b", b"\x0c\x0b", b" \x0c\n", b"\x1c", b"\xff\xfe"])
def test_a_conversation_body_of_stray_bytes_is_a_400(stack: Stack, body: bytes) -> None:
    """Only JSON whitespace is an absent body; \\x0b and \\x0c created a conversation."""
    for prefix in ("/v1", ""):
        reply = httpx.post(
            f"{stack.base_url}{prefix}/conversations",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("body", [b"", b" \t\r\n"])
def test_no_conversation_body_creates_an_empty_conversation(stack: Stack, body: bytes) -> None:
    reply = httpx.post(f"{stack.base_url}/v1/conversations", content=body)
    assert reply.status_code == 200 and reply.json()["object"] == "conversation"


@pytest.mark.parametrize("prefix", ["/v1", ""])
def test_input_tokens_with_an_empty_model_is_a_400(stack: Stack, prefix: str) -> None:
    reply = httpx.post(
        f"{stack.base_url}{prefix}/responses/input_tokens", json={"model": "", "input": "hi"}
    )
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "model", reply.text
