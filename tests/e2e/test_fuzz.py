"""Property-based fuzzing of every route of a running `serve`: no 5xx, always the envelope."""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import socket
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
POST_ROUTES = ["/v1/responses", "/v1/responses/input_tokens", "/v1/responses/compact"]


class Fuzzed:
    """The server under fuzz and what it answered."""

    def __init__(self, proc: Process, port: int, model: str) -> None:
        self.proc = proc
        self.base = f"http://127.0.0.1:{port}"
        self.model = model
        self.client = httpx.Client(base_url=self.base, timeout=120)
        self.statuses: Counter[int] = Counter()
        self.cases = 0


@pytest.fixture(scope="module")
def fuzzed(model_path: Path, request: pytest.FixtureRequest) -> Iterator[Fuzzed]:
    http, grpc_port = free_port(), free_port()
    with process(
        "--log-level", "WARNING", "serve", "--model", str(model_path),
        "--port", str(http), "--grpc-port", str(grpc_port),
        "--default-max-output-tokens", "8",
        "--max-request-bytes", str(MAX_REQUEST_BYTES),
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
                f"statuses {dict(sorted(target.statuses.items()))}"
            )
        target.client.close()


def _check(target: Fuzzed, path: str, reply: httpx.Response) -> None:
    """The invariant: no 5xx, JSON or SSE, errors in the envelope."""
    target.cases += 1
    target.statuses[reply.status_code] += 1
    body = reply.text
    assert reply.status_code < 500, f"{reply.status_code} on {path}: {body[:800]}"
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        frames = [f for f in body.split("\n\n") if f]
        assert frames, "an empty stream"
        last = json.loads(frames[-1].split("\n")[1][len("data: ") :])
        assert last["type"] in {"response.completed", "response.incomplete", "response.failed"}
        return
    data = reply.json()
    if reply.status_code >= 400:
        assert set(data) == {"error"}, body[:500]
        assert set(data["error"]) == {"message", "type", "param", "code"}, body[:500]
        assert isinstance(data["error"]["message"], str) and data["error"]["message"]


def _valid_body(model: str) -> dict[str, Any]:
    return {
        "model": model,
        "input": [{"type": "message", "role": "user", "content": "Reply with: hi"}],
        "max_output_tokens": 4,
        "temperature": 0,
        "instructions": "Be brief.",
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        "text": {"format": {"type": "text"}},
        "metadata": {"k": "v"},
        "store": True,
    }


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0])
    | st.text(max_size=30)
    | st.sampled_from(["\ud800", "\x00", "﷐\U0010ffff", "message", "function", "user"])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# Built fresh per draw: a mutation may write into them, and a shared one could contain itself.
huge_values = st.sampled_from(
    [
        lambda: "x" * 200_000,
        lambda: "€" * 100_000,
        lambda: "\U0001f600" * 50_000,
        lambda: ["Reply"] * 50_000,
        lambda: [{"type": "message", "role": "user", "content": "a"} for _ in range(3000)],
        lambda: {str(i): i for i in range(20_000)},
    ]
).map(lambda build: build())


def _deep(depth: int, kind: str) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if kind == "list" else {"type": "object", "properties": {"a": value}}
    return value


deep_values = st.builds(
    _deep, st.sampled_from([50, 120, 400, 900]), st.sampled_from(["list", "dict"])
)


@st.composite
def mutated(draw: st.DrawFn, model: str) -> Any:
    """A valid body with one to three mutations at random paths."""
    body: Any = _valid_body(model)
    for _ in range(draw(st.integers(1, 3))):
        # Walk to a random container inside the body.
        node = body
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            child = node[draw(st.sampled_from(keys))]
            if not isinstance(child, (dict, list)):
                break
            node = child
        if not isinstance(node, (dict, list)):
            continue
        op = draw(st.sampled_from(["replace", "replace", "delete", "add", "huge", "deep"]))
        value = draw(huge_values if op == "huge" else deep_values if op == "deep" else json_values)
        if isinstance(node, dict):
            key = (
                draw(st.text(max_size=12))
                if op == "add" or not node
                else draw(st.sampled_from(list(node)))
            )
            if op == "delete":
                node.pop(key, None)
            else:
                node[key] = value
        elif node:
            index = draw(st.integers(0, len(node) - 1))
            if op == "delete":
                node.pop(index)
            else:
                node[index] = value
    if draw(st.integers(0, 9)) == 0:
        body = draw(json_values)  # the whole body replaced: a scalar, an array...
    return body


@FUZZ
@given(data=st.data())
def test_mutated_bodies(fuzzed: Fuzzed, data: st.DataObject) -> None:
    body = data.draw(mutated(fuzzed.model))
    path = data.draw(st.sampled_from(POST_ROUTES))
    if isinstance(body, dict) and data.draw(st.booleans()):
        body["stream"] = True
    raw = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    reply = fuzzed.client.post(path, content=raw, headers={"content-type": "application/json"})
    _check(fuzzed, path, reply)


@FUZZ
@given(data=st.data())
def test_broken_encodings(fuzzed: Fuzzed, data: st.DataObject) -> None:
    raw = json.dumps(_valid_body(fuzzed.model)).encode()
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
    path = data.draw(st.sampled_from(POST_ROUTES))
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
    body = data.draw(json_in_strings(fuzzed.model))
    path = data.draw(st.sampled_from(POST_ROUTES))
    raw = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    reply = fuzzed.client.post(path, content=raw, headers={"content-type": "application/json"})
    _check(fuzzed, path, reply)


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
    raw = json.dumps(_valid_body(fuzzed.model)).encode()
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
    path = data.draw(st.sampled_from(POST_ROUTES))
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
    path=st.sampled_from(["/v1/responses", "/health", "/v1/models"]),
)
def test_headers(fuzzed: Fuzzed, headers: list[tuple[str, bytes]], path: str) -> None:
    body = json.dumps(_valid_body(fuzzed.model)).encode()
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
        error = json.loads(
            answer.split(b"\r\n0\r\n")[0].split(b"\r\n", 1)[-1]
            if b"chunked" in head.lower()
            else answer
        )["error"]
        assert set(error) == {"message", "type", "param", "code"}


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


def test_server_still_answers_after_fuzzing(fuzzed: Fuzzed) -> None:
    for path, method in [("/v1/models", "PUT"), ("/nowhere", "GET"), ("/v1/models", "GET")]:
        _check(fuzzed, path, fuzzed.client.request(method, path))
    assert fuzzed.client.get("/health").status_code == 200
    reply = fuzzed.client.post("/v1/responses", json=_valid_body(fuzzed.model))
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] in {"completed", "incomplete"}
    assert fuzzed.proc.alive()
    assert "Traceback" not in fuzzed.proc.output(), fuzzed.proc.output()[-4000:]
