"""Property-based fuzzing of every route of a running `serve`: no 5xx, always the envelope.

Every dialect (Responses, Anthropic Messages, Chat Completions, Completions, Conversations) and
the WebSocket mode get mutated bodies, hostile JSON inside strings, broken encodings and
headers. MLX_RESPONSES_FUZZ_EXAMPLES raises the count of each test for a long exploratory run.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import socket
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlx_responses.http_facade.kit.errors import speaks_anthropic

from tests.support.fuzz_bodies import (
    chat_body,
    completion_body,
    conversation_body,
    json_values,
    messages_body,
    mutated,
    responses_body,
)
from tests.support.processes import Process, free_port, process, wait_status

pytestmark = pytest.mark.e2e

MAX_REQUEST_BYTES = 1024 * 1024
# Budget: a few hundred cases in well under a minute on 2 shared cores.
# MLX_RESPONSES_FUZZ_EXAMPLES raises it for a long exploratory run.
FUZZ = settings(
    max_examples=int(os.environ.get("MLX_RESPONSES_FUZZ_EXAMPLES", "200")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Each POST route with a valid body of its dialect (the bare aliases share the handlers).
DIALECT_BODIES: dict[str, Callable[[str], dict[str, Any]]] = {
    "/v1/responses": responses_body,
    "/v1/responses/input_tokens": responses_body,
    "/v1/responses/compact": responses_body,
    "/v1/messages": messages_body,
    "/v1/messages/count_tokens": messages_body,
    "/messages": messages_body,
    "/v1/chat/completions": chat_body,
    "/chat/completions": chat_body,
    "/v1/completions": completion_body,
    "/completions": completion_body,
    "/v1/conversations": conversation_body,
    "/conversations": conversation_body,
}
POST_ROUTES = sorted(DIALECT_BODIES)
# The routes that store something: a refused request there must leave the store as it was.
SENTINEL_ROUTES = ["/v1/conversations/{sentinel}", "/v1/conversations/{sentinel}/items"]
TERMINAL_EVENTS = {"response.completed", "response.incomplete", "response.failed"}


class Fuzzed:
    """The server under fuzz, what it answered, and a conversation refused requests must not
    change."""

    def __init__(self, proc: Process, port: int, model: str) -> None:
        self.proc = proc
        self.base = f"http://127.0.0.1:{port}"
        self.model = model
        self.client = httpx.Client(base_url=self.base, timeout=120)
        self.statuses: Counter[int] = Counter()
        self.cases = 0
        self.by_route: Counter[str] = Counter()
        sentinel = self.client.post("/v1/conversations", json=conversation_body(model))
        assert sentinel.status_code == 200, sentinel.text
        self.sentinel = sentinel.json()["id"]
        self.stored = self.snapshot()

    def snapshot(self) -> Any:
        """The sentinel conversation and its items, as stored."""
        one = f"/v1/conversations/{self.sentinel}"
        items = self.client.get(f"{one}/items", params={"limit": 100, "order": "desc"})
        return self.client.get(one).json(), items.json()


@pytest.fixture(scope="module")
def fuzzed(model_path: Path, request: pytest.FixtureRequest) -> Iterator[Fuzzed]:
    http, grpc_port = free_port(), free_port()
    with process(
        "--log-level", "WARNING", "serve", "--model", str(model_path),
        "--port", str(http), "--grpc-port", str(grpc_port),
        "--default-max-output-tokens", "8",
        "--max-request-bytes", str(MAX_REQUEST_BYTES),
        # The sentinel conversation must outlive the thousands the fuzz creates (LRU of 256).
        "--conversation-store-max-entries", "1000000",
        "--conversation-store-max-bytes", str(1 << 30),
    ) as proc:  # fmt: skip
        wait_status(http, 200, proc)
        target = Fuzzed(proc, http, model_path.name)
        yield target
        # Recorded in the terminal summary: the figure the README quotes.
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"fuzz: {target.cases} cases, "
                f"{sum(n for s, n in target.statuses.items() if s >= 500)} 5xx, "
                f"statuses {dict(sorted(target.statuses.items()))}, "
                f"routes {dict(sorted(target.by_route.items()))}"
            )
        target.client.close()


def _sse_payloads(body: str) -> list[str]:
    return [
        line[len("data: ") :]
        for frame in body.split("\n\n")
        for line in frame.split("\n")
        if line.startswith("data: ")
    ]


def _check_stream(path: str, body: str) -> None:
    """A stream ends as its dialect ends one: a terminal event, [DONE], or an error frame."""
    payloads = _sse_payloads(body)
    assert payloads, "an empty stream"
    if payloads[-1] == "[DONE]":
        assert not path.startswith(("/v1/responses", "/responses")), body[-500:]
        return
    last = json.loads(payloads[-1])
    if speaks_anthropic(path):
        assert last["type"] in {"message_stop", "error"}, body[-500:]
        if last["type"] == "error":
            assert set(last["error"]) == {"type", "message"}
    elif path.startswith(("/v1/responses", "/responses")):
        assert last["type"] in TERMINAL_EVENTS, body[-500:]
    else:
        assert set(last) == {"error"}, body[-500:]  # chat and completions: a broken stream


def _check_error(path: str, data: Any, raw: str) -> None:
    """An error in its API's envelope."""
    if speaks_anthropic(path):
        assert set(data) == {"type", "error"} and data["type"] == "error", raw[:500]
        assert set(data["error"]) == {"type", "message"}, raw[:500]
        assert isinstance(data["error"]["message"], str) and data["error"]["message"]
        return
    assert set(data) == {"error"}, raw[:500]
    assert set(data["error"]) == {"message", "type", "param", "code"}, raw[:500]
    assert isinstance(data["error"]["message"], str) and data["error"]["message"]


def _check(target: Fuzzed, path: str, reply: httpx.Response) -> None:
    """The invariant: no 5xx, JSON or SSE, errors in the envelope of the route's API."""
    target.cases += 1
    target.statuses[reply.status_code] += 1
    target.by_route[path.split("?", maxsplit=1)[0]] += 1
    body = reply.text
    assert reply.status_code < 500, f"{reply.status_code} on {path}: {body[:800]}"
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        _check_stream(path, body)
        return
    data = reply.json()
    if reply.status_code >= 400:
        _check_error(path, data, body)


def _post_json(target: Fuzzed, path: str, body: Any) -> httpx.Response:
    raw = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    reply = target.client.post(path, content=raw, headers={"content-type": "application/json"})
    _check(target, path, reply)
    return reply


def _valid_body(model: str) -> dict[str, Any]:
    return responses_body(model)


@FUZZ
@given(data=st.data())
def test_mutated_bodies(fuzzed: Fuzzed, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(POST_ROUTES))
    body = data.draw(mutated(DIALECT_BODIES[path](fuzzed.model)))
    if isinstance(body, dict) and data.draw(st.booleans()):
        body["stream"] = True
    _post_json(fuzzed, path, body)


@FUZZ
@given(data=st.data())
def test_refused_writes_change_nothing(fuzzed: Fuzzed, data: st.DataObject) -> None:
    """Mutated metadata updates and item additions on a stored conversation: a refused one
    leaves it exactly as it was."""
    route = data.draw(st.sampled_from(SENTINEL_ROUTES))
    path = route.format(sentinel=fuzzed.sentinel)
    valid = conversation_body(fuzzed.model)
    valid.pop("items" if route.endswith("}") else "metadata")
    reply = _post_json(fuzzed, path, data.draw(mutated(valid)))
    if reply.status_code >= 400:
        assert fuzzed.snapshot() == fuzzed.stored, reply.text[:500]
    else:
        fuzzed.stored = fuzzed.snapshot()


@FUZZ
@given(data=st.data())
def test_broken_encodings(fuzzed: Fuzzed, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(POST_ROUTES))
    raw = json.dumps(DIALECT_BODIES[path](fuzzed.model)).encode()
    kind = data.draw(st.sampled_from(["truncated", "bytes", "deep", "type", "nan", "oversize"]))
    if kind == "truncated":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    elif kind == "bytes":
        raw = data.draw(st.binary(max_size=200))
    elif kind == "deep":
        depth = data.draw(st.sampled_from([1000, 5000, 100_000]))
        raw = b'{"model": "m", "input": ' + b"[" * depth + b"]" * depth + b"}"
    elif kind == "nan":
        raw = raw.replace(b'"temperature": 0', b'"temperature": NaN').replace(
            b'"max_output_tokens": 4', b'"max_output_tokens": Infinity'
        )
    elif kind == "oversize":
        raw = b'{"model": "m", "input": "' + b"z" * (MAX_REQUEST_BYTES + 1) + b'"}'
    content_type = data.draw(
        st.sampled_from(
            [
                "application/json",
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/json; charset=latin-1",
                "",
            ]
        )
    )
    headers = {"content-type": content_type} if content_type else {}
    reply = fuzzed.client.post(path, content=raw, headers=headers)
    _check(fuzzed, path, reply)
    if kind == "oversize":
        assert reply.status_code == 413


# JSON inside strings: what a client writes into arguments, compaction payloads, schemas and
# template kwargs, past the body's own bounds.
json_texts = st.one_of(
    json_values.map(lambda v: json.dumps(v, allow_nan=True)),
    st.builds(lambda n: "[" * n + "]" * n, st.sampled_from([10, 65, 1000, 20_000])),
    st.builds(lambda n: "[" * n, st.sampled_from([65, 5000])),
    st.builds(lambda n: "-" + "9" * n, st.sampled_from([99, 101, 5000])),
    st.builds(lambda n: "0." + "1" * n + "e999", st.integers(1, 400)),
    st.sampled_from(['"\\ud800"', '{"\\udfff": 1}', '["\\udbff\\udbff"]', "NaN", "{", "", "null"]),
)
hostile_schema_values = st.one_of(
    json_values,
    st.text(alphabet="é€😀\x00", min_size=40, max_size=120),
    st.sampled_from([-1, 10**30, 1.5, "3", None]),
)


def _hostile_schema(draw: st.DrawFn) -> dict[str, Any]:
    keyword = draw(st.sampled_from(["minLength", "maxItems", "enum", "const", "maximum", "type"]))
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    schema["properties"]["a"][keyword] = draw(hostile_schema_values)
    return schema


def _template_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    return {draw(st.sampled_from(["enable_thinking", "chat_template", "x"])): draw(json_values)}


@st.composite
def dialect_json_in_strings(draw: st.DrawFn, model: str, path: str) -> dict[str, Any]:
    """A valid body of `path`'s dialect whose JSON-bearing fields carry hostile JSON."""
    body = DIALECT_BODIES[path](model)
    if "responses" in path:
        return draw(json_in_strings(model))
    if "chat" in path:
        body["messages"][2]["tool_calls"][0]["function"]["arguments"] = draw(json_texts)
        body["tools"][0]["function"]["parameters"] = _hostile_schema(draw)
        if draw(st.booleans()):
            schema = {"name": "x", "schema": _hostile_schema(draw), "strict": draw(st.booleans())}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        body["tool_choice"] = draw(st.sampled_from(["auto", "required"]))
    elif "messages" in path:
        body["tools"][0]["input_schema"] = _hostile_schema(draw)
        body["tool_choice"] = {"type": draw(st.sampled_from(["auto", "any"]))}
    elif "conversations" in path:
        body["items"][1]["arguments"] = draw(json_texts)
        content = base64.urlsafe_b64encode(draw(json_texts).encode("utf-8", "surrogatepass"))
        body["items"].append({"type": "compaction", "encrypted_content": content.decode()})
    else:  # completions: the prompt is raw text, JSON or not
        body["prompt"] = draw(json_texts) or "x"
    if ("completions" not in path or "chat" in path) and draw(st.booleans()):
        body["chat_template_kwargs"] = _template_kwargs(draw)
    return body


@st.composite
def json_in_strings(draw: st.DrawFn, model: str) -> dict[str, Any]:
    """A valid body whose JSON-in-strings fields carry hostile JSON text."""
    body = _valid_body(model)
    arguments = draw(json_texts)
    body["input"] = [
        {"type": "message", "role": "user", "content": "Call it."},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": arguments},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    if draw(st.booleans()):
        payload = draw(json_texts)
        if draw(st.booleans()):
            payload = '{"summary": "s", "items": [], "x": ' + payload + "}"
        content = base64.urlsafe_b64encode(payload.encode("utf-8", "surrogatepass")).decode()
        body["input"].insert(0, {"type": "compaction", "encrypted_content": content.rstrip("=")})
    keyword = draw(st.sampled_from(["minLength", "maxItems", "enum", "const", "maximum", "type"]))
    schema = {"type": "object", "properties": {"a": {"type": "string", keyword: None}}}
    schema["properties"]["a"][keyword] = draw(hostile_schema_values)
    where = draw(st.sampled_from(["tools", "text", "both"]))
    if where in ("tools", "both"):
        body["tools"][0]["parameters"] = schema
        body["tool_choice"] = draw(st.sampled_from(["auto", "required"]))
    if where in ("text", "both"):
        body["text"] = {"format": {"type": "json_schema", "name": "x", "schema": schema}}
    if draw(st.booleans()):
        body["chat_template_kwargs"] = {
            draw(st.sampled_from(["enable_thinking", "chat_template", "x"])): draw(json_values)
        }
    return body


@FUZZ
@given(data=st.data())
def test_json_in_strings(fuzzed: Fuzzed, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(POST_ROUTES))
    body = data.draw(dialect_json_in_strings(fuzzed.model, path))
    if data.draw(st.booleans()) and "conversations" not in path:
        body["stream"] = True
    _post_json(fuzzed, path, body)


encodings = (
    st.one_of(
        st.sampled_from(["gzip", "deflate", "identity", "x-gzip", "br", "zstd", "compress"]),
        st.sampled_from(["gzip, gzip", "identity, gzip", "gzip, br", "GZIP", "deflate"]),
        st.text(alphabet="abcxyz-,; =", min_size=1, max_size=20),
    )
    .map(str.strip)
    .filter(bool)
)  # httpx itself refuses a value with blanks around it


@FUZZ
@given(data=st.data())
def test_content_encodings(fuzzed: Fuzzed, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(POST_ROUTES))
    raw = json.dumps(DIALECT_BODIES[path](fuzzed.model)).encode()
    packing = data.draw(st.sampled_from(["gzip", "deflate", "plain", "truncated", "bomb"]))
    if packing == "gzip":
        raw = gzip.compress(raw)
    elif packing == "deflate":
        raw = zlib.compress(raw)
    elif packing == "truncated":
        packed = gzip.compress(raw)
        raw = packed[: data.draw(st.integers(0, len(packed) - 1))]
    elif packing == "bomb":
        raw = gzip.compress(b'{"model": "m", "input": "' + b"z" * (MAX_REQUEST_BYTES + 1) + b'"}')
    encoding = data.draw(encodings)
    headers = {"content-type": "application/json", "content-encoding": encoding}
    with httpx.Client(base_url=fuzzed.base, timeout=120) as client:
        reply = client.post(path, content=raw, headers=headers)
        _check(fuzzed, path, reply)
        if packing == "bomb" and encoding.strip().lower() == "gzip":
            assert reply.status_code == 413
        # The client goes on, on this connection or a fresh one.
        assert client.get("/health").status_code == 200


header_names = st.text(alphabet="abcXYZ-_:0\x00 ", min_size=1, max_size=20) | st.sampled_from(
    ["Content-Length", "Transfer-Encoding", "Host", "Authorization", "X-Request-Id"]
)
header_values = st.one_of(
    st.binary(max_size=60),
    st.sampled_from([b"chunked", b"5", b"-1", b"Bearer \r\nX: y", b"\x00", b"a\rb"]),
    st.builds(lambda n: b"v" * n, st.sampled_from([8000, 9000, 100_000])),
)


def _raw_request(port: int, data: bytes) -> tuple[int, bytes, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)  # with Connection: close, the server closes after answering
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, head, body


@FUZZ
@given(
    headers=st.lists(st.tuples(header_names, header_values), max_size=4),
    path=st.sampled_from([*POST_ROUTES, "/health", "/v1/models"]),
)
def test_headers(fuzzed: Fuzzed, headers: list[tuple[str, bytes]], path: str) -> None:
    body = json.dumps(DIALECT_BODIES.get(path, _valid_body)(fuzzed.model)).encode()
    lines = [f"POST {path} HTTP/1.1".encode(), b"Host: x", b"Connection: close"]
    lines.append(b"Content-Type: application/json")
    lines += [name.encode("utf-8", "surrogatepass") + b": " + value for name, value in headers]
    if not any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers):
        lines.append(f"Content-Length: {len(body)}".encode())
    port = int(fuzzed.base.rsplit(":", 1)[1])
    status, head, answer = _raw_request(port, b"\r\n".join(lines) + b"\r\n\r\n" + body)
    fuzzed.cases += 1
    fuzzed.statuses[status] += 1
    assert 0 < status < 500, (status, head[:300], answer[:300])
    if status >= 400:
        assert b"application/json" in head.lower(), head[:300]
        data = json.loads(
            answer.split(b"\r\n0\r\n")[0].split(b"\r\n", 1)[-1]
            if b"chunked" in head.lower()
            else answer
        )
        # aiohttp's parser refuses a malformed request before its path is known: the OpenAI
        # envelope then, whatever the path (http_facade/kit/protocol_errors.py).
        before_routing = data.get("error", {}).get("code") == "invalid_http_request"
        _check_error("/" if before_routing else path, data, answer.decode("utf-8", "replace"))


ids = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=300
) | st.sampled_from(["resp_", "resp_" + "0" * 48, "..", "%2e%2e", "resp_x/../../models"])


@FUZZ
@given(response_id=ids, method=st.sampled_from(["GET", "DELETE", "POST"]))
def test_ids_and_methods(fuzzed: Fuzzed, response_id: str, method: str) -> None:
    suffix = "/cancel" if method == "POST" else ""
    path = "/v1/responses/" + quote(response_id, safe="/.%~") + suffix
    reply = fuzzed.client.request(method, path)
    _check(fuzzed, "/v1/responses/{id}", reply)
    if reply.status_code == 200:
        # Only the model listing or a real stored response may come back.
        assert reply.json().get("object") in {"response", "list"}


async def _socket_exchange(base: str, message: str | bytes) -> list[dict[str, Any]]:
    """One message on a fresh socket; the events it answers, until an end or an error."""
    received: list[dict[str, Any]] = []
    timeout = aiohttp.ClientTimeout(total=120)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.ws_connect(f"{base}/v1/responses", max_msg_size=0) as ws,
    ):
        await (ws.send_bytes(message) if isinstance(message, bytes) else ws.send_str(message))
        async for reply in ws:
            assert reply.type == aiohttp.WSMsgType.TEXT, (reply.type, reply.data)
            event = json.loads(reply.data)
            received.append(event)
            if event.get("type") == "error" or event.get("type") in TERMINAL_EVENTS:
                break
        else:
            raise AssertionError(f"the socket closed without an answer: {ws.close_code}")
    return received


socket_messages = st.one_of(
    st.builds(
        lambda body: {"type": "response.create", **body} if isinstance(body, dict) else body,
        mutated(responses_body("MODEL")),
    ),
    json_values,
)


@FUZZ
@given(data=st.data())
def test_websocket_messages(fuzzed: Fuzzed, data: st.DataObject) -> None:
    """WebSocket mode: mutated `response.create` messages, other JSON, text that is not JSON
    (deep, NaN, surrogates) and bytes; each gets its events or an error event in the envelope,
    never a broken socket."""
    kind = data.draw(st.sampled_from(["json", "json", "text", "bytes"]))
    if kind == "json":
        value = data.draw(socket_messages)
        if isinstance(value, dict) and value.get("model") == "MODEL":
            value["model"] = fuzzed.model
        message: str | bytes = json.dumps(value, allow_nan=True)
    elif kind == "text":
        message = data.draw(json_texts)
    else:
        message = data.draw(st.binary(max_size=200))
    events = asyncio.run(_socket_exchange(fuzzed.base, message))
    fuzzed.cases += 1
    fuzzed.by_route["ws /v1/responses"] += 1
    last = events[-1]
    if last["type"] == "error":
        assert last["status"] < 500, last
        fuzzed.statuses[last["status"]] += 1
        assert set(last["error"]) == {"message", "type", "param", "code"}, last
    else:
        fuzzed.statuses[200] += 1


def test_server_still_answers_after_fuzzing(fuzzed: Fuzzed) -> None:
    for path, method in [("/v1/models", "PUT"), ("/nowhere", "GET"), ("/v1/models", "GET")]:
        _check(fuzzed, path, fuzzed.client.request(method, path))
    assert fuzzed.client.get("/health").status_code == 200
    reply = fuzzed.client.post("/v1/responses", json=_valid_body(fuzzed.model))
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] in {"completed", "incomplete"}
    assert fuzzed.snapshot() == fuzzed.stored
    assert fuzzed.proc.alive()
    assert "Traceback" not in fuzzed.proc.output(), fuzzed.proc.output()[-4000:]
