"""A client hanging up mid-stream is an ordinary event: never a 500, never an ERROR line."""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
import time

import httpx
import pytest
from aiohttp import web

from tests.support.stack import Stack
from tests.support.waits import until

HANGUPS = 24


def _hang_up(stack: Stack, after_bytes: int, abortive: bool) -> None:
    body = json.dumps(
        {
            "model": stack.settings.models[0].name,
            "input": "go on forever",
            "stream": True,
            "max_output_tokens": 100000,
        }
    ).encode()
    request = (
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    sock = socket.create_connection(("127.0.0.1", stack.http_port), timeout=30)
    try:
        sock.sendall(request)
        seen = 0
        while seen < after_bytes:
            chunk = sock.recv(4096)
            if not chunk:
                break
            seen += len(chunk)
    finally:
        if abortive:  # RST, as a killed client; else FIN, as curl --max-time
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


def _status_counts(stack: Stack, route: str = "/v1/responses") -> dict[str, float]:
    text = httpx.get(f"{stack.base_url}/metrics", timeout=10).text
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("mlx_responses_http_requests_total{") and f'route="{route}"' in line:
            status = line.split('status="')[1].split('"')[0]
            counts[status] = counts.get(status, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def _answered(
    stack: Stack, before: dict[str, float], n: int, route: str = "/v1/responses"
) -> dict[str, float] | None:
    """The route's counts by status, once `n` more requests than `before` have been answered."""
    counts = _status_counts(stack, route)
    return counts if sum(counts.values()) >= sum(before.values()) + n else None


def test_hang_ups_mid_stream_are_not_500s(
    random_stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    before = _status_counts(random_stack)
    threads = [
        threading.Thread(target=_hang_up, args=(random_stack, 600 + 97 * i, i % 2 == 0))
        for i in range(HANGUPS)
    ]
    for thread in threads:
        thread.start()
        time.sleep(0.01)
    for thread in threads:
        thread.join(60)
    # Every hang-up has been answered (counted once its handler ended) and left the engine.
    after = until(lambda: _answered(random_stack, before, HANGUPS), "every hang-up answered")
    until(lambda: random_stack.engine_stats.active == 0, "the engine idle")
    assert after.get("500", 0) == before.get("500", 0), after
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


@pytest.mark.parametrize("route", ["/v1/responses", "/v1/chat/completions", "/v1/messages"])
def test_a_write_to_a_closing_transport_is_a_hang_up(
    random_stack: Stack,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    route: str,
) -> None:
    """The race the storms hit, made certain: the peer's reset has closed the transport (its
    connection_lost not yet run) when the stream writes its next frame."""
    caplog.set_level(logging.INFO)
    original = web.StreamResponse.write
    writes = {"n": 0}

    async def write(self: web.StreamResponse, data: bytes | bytearray | memoryview) -> None:
        writes["n"] += 1
        request = self._req
        if writes["n"] == 3 and request is not None and request.transport is not None:
            request.transport.close()
        await original(self, data)

    monkeypatch.setattr(web.StreamResponse, "write", write)
    before = _status_counts(random_stack, route)
    model = random_stack.settings.models[0].name
    turn = [{"role": "user", "content": "go on forever"}]
    fields: dict[str, object] = {
        "/v1/responses": {"input": "go on forever", "max_output_tokens": 100000},
        "/v1/chat/completions": {"messages": turn, "max_tokens": 100000},
        "/v1/messages": {"messages": turn, "max_tokens": 100000},
    }[route]
    body = {"model": model, "stream": True, **fields}
    with (
        pytest.raises(httpx.HTTPError),
        httpx.stream("POST", f"{random_stack.base_url}{route}", json=body, timeout=30) as reply,
    ):
        for _ in reply.iter_bytes():
            pass
    monkeypatch.undo()
    after = until(lambda: _answered(random_stack, before, 1, route), "the request answered")
    assert after.get("500", 0) == before.get("500", 0), after
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_grpc_aio_hang_up_records_are_info() -> None:
    """grpc.aio's own ERROR for a write to a caller that just left is an INFO line."""
    from mlx_responses.service.rpc.hangups import GRPC_AIO_LOGGER, HANGUP_MARK, quiet_hangup_logs

    quiet_hangup_logs()
    logger = logging.getLogger(GRPC_AIO_LOGGER)
    record = logger.makeRecord(
        GRPC_AIO_LOGGER, logging.ERROR, __file__, 1, f"{HANGUP_MARK} [%s]", ("/x/Y",), None
    )
    assert all(f.filter(record) for f in logger.filters)
    assert record.levelno == logging.INFO and "/x/Y" in record.getMessage()
    other = logger.makeRecord(GRPC_AIO_LOGGER, logging.ERROR, __file__, 1, "boom", (), None)
    assert all(f.filter(other) for f in logger.filters) and other.levelno == logging.ERROR


@pytest.mark.parametrize("when", ["at_once", "mid_generation"])
@pytest.mark.parametrize("route", ["/v1/responses", "/v1/chat/completions"])
def test_a_foreground_create_follows_its_client(random_stack: Stack, route: str, when: str) -> None:
    """Only a background create outlives its client (http_facade/kit/hangups.py): a plain
    (non-streamed) create whose socket closes, right after its body or while it generates,
    frees the engine."""
    stats = random_stack.engine_stats
    until(lambda: stats.active == 0, "the engine idle")
    fields: dict[str, object] = {
        "/v1/responses": {"input": "go on forever", "max_output_tokens": 100000},
        "/v1/chat/completions": {
            "messages": [{"role": "user", "content": "go on forever"}],
            "max_tokens": 100000,
        },
    }[route]
    model = random_stack.settings.models[0].name
    body = json.dumps({"model": model, "temperature": 0, **fields}).encode()
    request = (
        f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    tokens, completed, cancelled = stats.generated_tokens, stats.completed, stats.cancelled
    before = _status_counts(random_stack, route)
    with socket.create_connection(("127.0.0.1", random_stack.http_port), timeout=30) as sock:
        sock.sendall(request)
        if when == "mid_generation":
            until(lambda: stats.active == 1 and stats.generated_tokens > tokens, "it generates")
    # Its handler ended with its client ("cancelled", counted at once); one that outlived its
    # client would be counted 200 once it had decoded the rest of the 4,096-token context.
    after = until(lambda: _answered(random_stack, before, 1, route), "the request answered")
    assert after.get("cancelled", 0) == before.get("cancelled", 0) + 1, after
    # The engine let it go: cancelled, never run to its end.
    until(lambda: stats.active == 0, "the engine idle")
    assert stats.completed == completed, "the engine generated on for a client that left"
    if when == "mid_generation":
        assert stats.cancelled == cancelled + 1
