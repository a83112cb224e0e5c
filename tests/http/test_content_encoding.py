"""Content-Encoding: gzip/deflate bodies decode (bounded by the body limit); others are 415, corrupt
ones 400, in the envelope, and the client can go on."""

from __future__ import annotations

import gzip
import json
import logging
import zlib
from typing import Any

import httpx
import pytest
from mlx_responses.http_facade.config import DEFAULT_MAX_REQUEST_BYTES

from tests.support.stack import Stack


def _body(stack: Stack) -> bytes:
    body = {
        "model": stack.settings.models[0].name,
        "input": "Reply with: hi",
        "max_output_tokens": 2,
    }
    return json.dumps(body).encode()


def _post(client: httpx.Client, data: bytes, encoding: str) -> httpx.Response:
    headers = {"content-type": "application/json", "content-encoding": encoding}
    return client.post("/v1/responses/input_tokens", content=data, headers=headers)


def _envelope(reply: httpx.Response) -> dict[str, Any]:
    assert reply.headers["content-type"].startswith("application/json"), reply.text
    error: dict[str, Any] = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("identity", lambda b: b)],
)
def test_encoded_bodies_decode(stack: Stack, encoding: str, pack: Any) -> None:
    with httpx.Client(base_url=stack.base_url, timeout=60) as client:
        reply = _post(client, pack(_body(stack)), encoding)
        assert reply.status_code == 200, reply.text
        assert reply.json()["input_tokens"] > 0


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_plain_body_labelled_compressed_is_400_and_the_client_goes_on(
    stack: Stack, encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with httpx.Client(base_url=stack.base_url, timeout=60) as client:
        reply = _post(client, _body(stack), encoding)
        assert reply.status_code == 400, reply.text
        assert _envelope(reply)["code"] == "invalid_content_encoding"
        again = _post(client, _body(stack), "identity")
        assert again.status_code == 200, again.text
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, br", "x-unknown"])
def test_other_encodings_are_415(stack: Stack, encoding: str) -> None:
    with httpx.Client(base_url=stack.base_url, timeout=60) as client:
        reply = _post(client, _body(stack), encoding)
        assert reply.status_code == 415, reply.text
        assert _envelope(reply)["code"] == "unsupported_content_encoding"
        assert _post(client, _body(stack), "identity").status_code == 200


def test_a_compression_bomb_is_413(stack: Stack) -> None:
    bomb = gzip.compress(b'{"input": "' + b" " * (DEFAULT_MAX_REQUEST_BYTES + 1) + b'"}')
    assert len(bomb) < DEFAULT_MAX_REQUEST_BYTES // 100
    with httpx.Client(base_url=stack.base_url, timeout=60) as client:
        reply = _post(client, bomb, "gzip")
        assert reply.status_code == 413, reply.text
        assert _envelope(reply)["code"] == "request_too_large"
