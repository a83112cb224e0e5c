"""Requests aiohttp's parser refuses answer in the OpenAI envelope and log at most INFO, rarely."""

from __future__ import annotations

import json
import logging
import socket

import pytest
from mlx_responses.http_facade.kit.protocol_errors import REFUSALS_PER_WINDOW, RateLimit

from tests.support.stack import Stack

MALFORMED = {
    "huge_header": b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
    "nul_in_header": b"GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n",
    "cr_in_header": b"GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a\rb\r\n\r\n",
    "length_and_chunked": (
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "bad_request_line": b"GET /health HTTP/9.9 extra\r\nHost: x\r\n\r\n",
}


def _raw(stack: Stack, data: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", stack.http_port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_parser_refusals_are_enveloped(stack: Stack, name: str) -> None:
    status, headers, body = _raw(stack, MALFORMED[name])
    assert 400 <= status < 500, body[:200]
    assert headers["content-type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "extra", [b"X: a\x00b\r\n", b"Content-Encoding: br\r\nContent-Length: 2\r\n\r\n{}"]
)
def test_parser_refusals_on_anthropic_routes_use_its_envelope(stack: Stack, extra: bytes) -> None:
    head = b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    status, _, body = _raw(stack, head + extra + (b"" if b"{}" in extra else b"\r\n"))
    assert 400 <= status < 500, body[:200]
    reply = json.loads(body)
    assert reply["type"] == "error" and set(reply["error"]) == {"type", "message"}, reply


def test_refusals_log_at_info_and_rate_limited(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(3 * REFUSALS_PER_WINDOW):
        _raw(stack, MALFORMED["nul_in_header"])
    assert not [r for r in caplog.records if r.levelno > logging.INFO], [
        r.getMessage() for r in caplog.records if r.levelno > logging.INFO
    ]
    refusals = [r for r in caplog.records if "malformed HTTP request" in r.getMessage()]
    assert len(refusals) <= REFUSALS_PER_WINDOW


def test_rate_limit_counts_what_it_drops() -> None:
    now = [0.0]
    limit = RateLimit(burst=2, window=10, clock=lambda: now[0])
    assert [limit.allow()[0] for _ in range(5)] == [True, True, False, False, False]
    now[0] = 10.0
    assert limit.allow() == (True, 3)


def test_a_refusal_is_read_by_a_client_still_sending(stack: Stack) -> None:
    """A refused request's client may still be sending (a 100 kB header goes out in several
    segments). The façade lingers: it answers, half-closes, and drops what still arrives until the
    client's FIN, so the answer is read whole; closing with unread input makes the kernel reset
    the connection, and the reset can beat the answer (`sendall` or `recv` fails)."""
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", stack.http_port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
            sock.sendall(b"a" * 4_000_000)
            sock.shutdown(socket.SHUT_WR)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        assert head.split(b" ", 2)[1] == b"400", head[:200]
        assert json.loads(body)["error"]["type"] == "invalid_request_error"
