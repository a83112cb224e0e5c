"""--isolate-keys, route by route: every HTTP route, WebSocket message and gRPC call that takes
an id answers another key's id exactly as it answers an id that names nothing.

The owner makes a stored response, a finished and a running background job, a foreground
response still streaming and a conversation; another key then tries each of their ids, and each
answer (status and body, or gRPC code and details) must equal the answer to an unknown id of the
same shape once both ids are blanked. The walk also checks that it covers every route and RPC
that takes an id, so a new one fails here until it is added.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from string import Template
from typing import Any

import grpc
import httpx
import pytest
import redis
from google.protobuf.message import Message
from mlx_responses.service.ids import OWNER as OWNER_VAR
from mlx_responses.service.ids import new_id, owner_of
from websockets.sync.client import connect

from mlx_responses.v1 import compaction_service_pb2 as cp
from mlx_responses.v1 import generation_service_pb2 as gen
from mlx_responses.v1 import jobs_service_pb2 as jobs
from mlx_responses.v1 import jobs_service_pb2_grpc as jobs_grpc
from mlx_responses.v1 import storage_service_pb2 as st
from mlx_responses.v1 import storage_service_pb2_grpc as st_grpc
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack
from tests.support.topology import Topology
from tests.support.waits import until

OWNER = "sk-owner-4f1a9c0d7e"
OTHER = "sk-other-b83e51aa20"
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "response.cancelled")
Ids = dict[str, str]

# HTTP: (method, route, path, body). Paths and bodies name ids as ${rid} and so on.
TOKENS = "/v1/responses/input_tokens"
BODIED = ("/v1/responses", TOKENS, "/v1/responses/compact")
ONE = "/v1/responses/{response_id}"
CONV = "/v1/conversations/{conversation_id}"
ITEMS = f"{CONV}/items"
ITEM = f"{CONV}/items/{{item_id}}"
MESSAGE = {"type": "message", "role": "user", "content": "x"}
# The owner's responses: stored, a finished job, a running job, a foreground one streaming.
RESPONSES = ("rid", "job", "running", "live")


def _ref(name: str) -> dict[str, Any]:
    return {"input": [{"type": "item_reference", "id": f"${{{name}}}"}]}


HTTP: list[tuple[str, str, str, dict[str, Any] | None]] = [
    *[("GET", ONE, f"/v1/responses/${{{i}}}", None) for i in RESPONSES],
    *[
        ("GET", ONE, f"/v1/responses/${{{i}}}?stream=true{after}", None)
        for i in RESPONSES
        for after in ("", "&starting_after=0")
    ],
    *[
        ("GET", f"{ONE}/input_items", f"/v1/responses/${{{i}}}/input_items", None)
        for i in RESPONSES
    ],
    *[("POST", f"{ONE}/cancel", f"/v1/responses/${{{i}}}/cancel", None) for i in RESPONSES],
    *[("DELETE", ONE, f"/v1/responses/${{{i}}}", None) for i in RESPONSES],
    *[
        ("POST", "/v1/responses", "/v1/responses", {"previous_response_id": f"${{{i}}}", **extra})
        for i in RESPONSES
        for extra in ({}, {"background": True}, {"stream": True})
    ],
    *[
        ("POST", path, path, _ref(name))
        for path in BODIED
        for name in ("rid_item", "out_item", "job_item", "conv_item")
    ],
    *[("POST", path, path, {"previous_response_id": "${rid}"}) for path in BODIED[1:]],
    ("POST", TOKENS, TOKENS, {"conversation": "${cid}"}),
    ("GET", CONV, "/v1/conversations/${cid}", None),
    ("POST", CONV, "/v1/conversations/${cid}", {"metadata": {"a": "b"}}),
    ("GET", ITEMS, "/v1/conversations/${cid}/items", None),
    ("POST", ITEMS, "/v1/conversations/${cid}/items", {"items": [MESSAGE]}),
    ("GET", ITEM, "/v1/conversations/${cid}/items/${conv_item}", None),
    ("DELETE", ITEM, "/v1/conversations/${cid}/items/${conv_item}", None),
    ("DELETE", CONV, "/v1/conversations/${cid}", None),
]

# gRPC: (service, method, request). Requests name ids as ${rid} and so on.


def _by_id(service: str, method: str, kind: type[Message], names: tuple[str, ...]) -> Any:
    return [(service, method, kind(id=f"${{{name}}}")) for name in names]


def _item(method: str, kind: type[Message]) -> tuple[str, str, Message]:
    return ("storage", method, kind(conversation_id="${cid}", item_id="${conv_item}"))


GRPC: list[tuple[str, str, Message]] = [
    *_by_id("storage", "GetResponse", st.GetResponseRequest, RESPONSES),
    *_by_id("storage", "ListInputItems", st.ListInputItemsRequest, RESPONSES),
    *_by_id("storage", "DeleteResponse", st.DeleteResponseRequest, RESPONSES),
    *_by_id("jobs", "WatchJob", jobs.WatchJobRequest, RESPONSES),
    *_by_id("jobs", "StreamJobEvents", jobs.StreamJobEventsRequest, RESPONSES),
    *_by_id("jobs", "CancelResponse", jobs.CancelResponseRequest, RESPONSES),
    *_by_id("storage", "GetConversation", st.GetConversationRequest, ("cid",)),
    *_by_id("storage", "RetrieveConversation", st.RetrieveConversationRequest, ("cid",)),
    (
        "storage",
        "UpdateConversation",
        st.UpdateConversationRequest(id="${cid}", metadata={"a": "b"}),
    ),
    *_by_id("storage", "ListConversationItems", st.ListConversationItemsRequest, ("cid",)),
    *_by_id("storage", "AddConversationItems", st.AddConversationItemsRequest, ("cid",)),
    _item("GetConversationItem", st.GetConversationItemRequest),
    _item("DeleteConversationItem", st.DeleteConversationItemRequest),
    *_by_id("storage", "DeleteConversation", st.DeleteConversationRequest, ("cid",)),
]
# RPCs whose request carries CreateResponseParams (previous_response_id, conversation,
# item_reference): the HTTP route above that sends each.
PARAMS_RPCS = {
    "CreateResponse": "/v1/responses",
    "StreamResponse": "/v1/responses",
    "CreateJob": "/v1/responses",
    "CountInputTokens": "/v1/responses/input_tokens",
    "CompactResponse": "/v1/responses/compact",
}


def _model(stack: Stack) -> str:
    return stack.settings.models[0].name


def _headers(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture(params=["memory", "redis"])
def isolated(request: pytest.FixtureRequest, make_stack: Any, random_model: Path) -> Stack:
    """Two isolated keys over the random model (its jobs run until they are cancelled)."""
    url = "memory"
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        url = server.url(7)
        redis.Redis.from_url(url).flushdb()
    stack: Stack = make_stack(
        random_model, api_keys=(OWNER, OTHER), isolate_keys=True, store_url=url
    )
    return stack


def _call(base_url: str, method: str, path: str, body: Any, key: str) -> tuple[int, str]:
    """Status and body; of a stream, its first event (a leak may stream for ever)."""
    with httpx.stream(
        method, f"{base_url}{path}", json=body, headers=_headers(key), timeout=60
    ) as reply:
        if not reply.headers.get("content-type", "").startswith("text/event-stream"):
            return reply.status_code, reply.read().decode()
        first = next((line for line in reply.iter_lines() if line.startswith("data: ")), "")
        return reply.status_code, first


def _ok(stack: Stack, method: str, path: str, body: Any = None) -> Any:
    reply = httpx.request(
        method, f"{stack.base_url}{path}", json=body, headers=_headers(OWNER), timeout=60
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def _create(stack: Stack, **fields: Any) -> Any:
    body = {"model": _model(stack), "input": "The secret is 7.", **fields}
    return _ok(stack, "POST", "/v1/responses", {"max_output_tokens": 4, **body})


def _wait(stack: Stack, rid: str, done: Callable[[str], bool]) -> None:
    until(lambda: done(_ok(stack, "GET", f"/v1/responses/{rid}")["status"]), rid)


def _events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data: "):
            yield json.loads(line[6:])


def _owned(stack: Stack, live: str) -> Ids:
    """The owner's ids (`live`: its foreground response, streaming)."""
    rid = _create(stack)
    job = _create(stack, background=True)
    _wait(stack, job["id"], lambda s: s not in ("queued", "in_progress"))
    running = _create(stack, background=True, max_output_tokens=100_000)
    _wait(stack, running["id"], lambda s: s == "in_progress")
    messages = [{"type": "message", "role": "user", "content": "The conversation secret is 9."}]
    cid = _ok(stack, "POST", "/v1/conversations", {"items": messages})["id"]

    def first(path: str) -> str:
        return str(_ok(stack, "GET", path)["data"][0]["id"])

    assert rid["output"], rid
    return {
        "rid": rid["id"],
        "job": job["id"],
        "running": running["id"],
        "live": live,
        "rid_item": first(f"/v1/responses/{rid['id']}/input_items"),
        "out_item": rid["output"][0]["id"],
        "job_item": first(f"/v1/responses/{job['id']}/input_items"),
        "cid": cid,
        "conv_item": first(f"/v1/conversations/{cid}/items"),
    }


def _unknown_response() -> str:
    """A response id the other key would own, naming nothing."""
    context = contextvars.copy_context()
    context.run(OWNER_VAR.set, owner_of(OTHER))
    return context.run(new_id, "resp")


def _scoped(item_id: str, scope_id: str) -> str:
    """An item id of `item_id`'s kind inside `scope_id` (which holds no such item)."""
    return f"{item_id.partition('_')[0]}_{scope_id.partition('_')[2]}{secrets.token_hex(4)}"


def _unknown(owned: Ids) -> Ids:
    ids = {name: _unknown_response() for name in RESPONSES}
    cid = f"conv_{secrets.token_hex(24)}"
    return {
        **ids,
        "rid_item": _scoped(owned["rid_item"], ids["rid"]),
        "out_item": _scoped(owned["out_item"], ids["rid"]),
        "job_item": _scoped(owned["job_item"], ids["job"]),
        "cid": cid,
        "conv_item": _scoped(owned["conv_item"], cid),
    }


def _fill(value: Any, ids: Ids) -> Any:
    if isinstance(value, str):
        return Template(value).substitute(ids)
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    return value


def _blank(text: str, ids: Ids) -> str:
    """The answer with each id replaced by its name (longest first: no id holds another)."""
    for name, value in sorted(ids.items(), key=lambda kv: -len(kv[1])):
        text = text.replace(value, f"<{name}>")
    return text


def _http(stack: Stack, probe: tuple[str, str, str, dict[str, Any] | None], ids: Ids) -> str:
    method, _, path, body = probe
    if body is not None and path.partition("?")[0] in BODIED:
        body = {"model": _model(stack), "input": "x", "max_output_tokens": 1, **body}
    status, text = _call(stack.base_url, method, _fill(path, ids), _fill(body, ids), OTHER)
    return f"{status} {_blank(text, ids)}"


def _socket(stack: Stack, body: dict[str, Any], ids: Ids) -> str:
    """The first message a WebSocket turn answers."""
    url = stack.base_url.replace("http://", "ws://") + "/v1/responses"
    message = {
        "type": "response.create",
        "model": _model(stack),
        "input": "x",
        "max_output_tokens": 1,
        **_fill(body, ids),
    }
    with connect(url, additional_headers=_headers(OTHER), open_timeout=30) as ws:
        ws.send(json.dumps(message))
        return _blank(str(ws.recv(timeout=60)), ids)


def _grpc(stack: Stack, probe: tuple[str, str, Message], ids: Ids) -> str:
    service, method, template = probe
    request = type(template)()
    request.CopyFrom(template)
    for field, value in template.ListFields():
        if isinstance(value, str):
            setattr(request, field.name, _fill(value, ids))
    metadata = [("authorization", f"Bearer {OTHER}")]
    with grpc.insecure_channel(stack.grpc_address) as channel:
        stub: Any = (
            st_grpc.StorageServiceStub(channel)
            if service == "storage"
            else jobs_grpc.JobsServiceStub(channel)
        )
        call: Any = None
        try:
            call = getattr(stub, method)(request, metadata=metadata, timeout=60)
            answer = call if isinstance(call, Message) else next(call)
        except grpc.RpcError as error:
            return f"{error.code().name} {_blank(error.details() or '', ids)}"
        finally:
            if call is not None and not isinstance(call, Message):
                call.cancel()
    return f"OK {_blank(str(answer), ids)}"


SERVICES = (st, jobs, gen, cp)


def _id_rpcs() -> set[str]:
    """Every RPC whose request names a response, conversation or item."""
    found = set()
    for module in SERVICES:
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                names = {f.name for f in method.input_type.fields}
                if names & {"id", "conversation_id", "item_id"}:
                    found.add(method.name)
    return found


def _params_rpcs() -> set[str]:
    """Every RPC whose request carries CreateResponseParams."""
    found = set()
    for module in SERVICES:
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                types = {f.message_type.name for f in method.input_type.fields if f.message_type}
                if "CreateResponseParams" in types:
                    found.add(method.name)
    return found


def _routes(stack: Stack) -> set[tuple[str, str]]:
    """The façade's routes that take an id in their path (under /v1; the bare ones alias them)."""
    assert stack.runner is not None
    routes = set()
    for route in stack.runner.app.router.routes():
        path = route.resource.canonical if route.resource is not None else ""
        if route.method == "HEAD" or path.startswith(("/v1/models", "/models")):
            continue  # HEAD is GET's handler; a model id is no one's
        if "{" in path:
            routes.add((route.method, path if path.startswith("/v1") else f"/v1{path}"))
    return routes


def test_the_walk_covers_every_route_and_rpc_taking_an_id(stack: Stack) -> None:
    assert _routes(stack) <= {(method, route) for method, route, _, _ in HTTP}
    assert _id_rpcs() == {method for _, method, _ in GRPC}
    assert _params_rpcs() == set(PARAMS_RPCS)
    assert set(PARAMS_RPCS.values()) <= {route for _, route, _, _ in HTTP}


@contextlib.contextmanager
def _live(base_url: str, model: str) -> Iterator[tuple[str, Iterator[dict[str, Any]]]]:
    """A foreground response of the owner's, streaming while the test runs."""
    body = {"model": model, "input": "go", "stream": True, "max_output_tokens": 100_000}
    with httpx.stream(
        "POST", f"{base_url}/v1/responses", json=body, headers=_headers(OWNER), timeout=60
    ) as reply:
        events = _events(reply.iter_lines())
        first = next(events)
        yield first["response"]["id"], events


def _probes(stack: Stack) -> list[tuple[str, Callable[[Ids], str]]]:
    """Every probe, by name: each answers for the ids it is given, blanked."""
    sockets = ({"previous_response_id": "${rid}"}, _ref("rid_item"), _ref("conv_item"))
    return [
        *[(f"{p[0]} {p[2]} {p[3]}", lambda ids, p=p: _http(stack, p, ids)) for p in HTTP],
        *[(f"ws {b}", lambda ids, b=b: _socket(stack, b, ids)) for b in sockets],
        *[(f"grpc {p[1]} {p[2]}", lambda ids, p=p: _grpc(stack, p, ids)) for p in GRPC],
    ]


def test_a_foreign_id_answers_as_an_unknown_one(isolated: Stack) -> None:
    stack = isolated
    cancelled = stack.engine_stats.cancelled
    with _live(stack.base_url, _model(stack)) as (live, events):
        owned = _owned(stack, live)
        unknown = _unknown(owned)
        leaks = []
        for name, probe in _probes(stack):
            expected, foreign = probe(unknown), probe(owned)
            if foreign != expected:
                leaks.append(f"{name}:\n  unknown: {expected[:300]}\n  foreign: {foreign[:300]}")
        if leaks:  # every one of them, untruncated
            pytest.fail(f"{len(leaks)} answers differ:\n" + "\n".join(leaks), pytrace=False)
        # Nothing the other key did reached the owner's objects.
        assert stack.core is not None
        assert live in stack.core.pipeline.in_flight and owned["running"] in stack.core.jobs.active
        assert stack.engine_stats.cancelled == cancelled
        for _ in range(3):
            assert next(events)["type"] not in TERMINAL
        assert _ok(stack, "GET", f"/v1/responses/{owned['running']}")["status"] == "in_progress"
        items = _ok(stack, "GET", f"/v1/responses/{owned['rid']}/input_items")["data"]
        assert "The secret is 7." in json.dumps(items)
        _ok(stack, "GET", f"/v1/responses/{owned['job']}")
        conv_item = f"/v1/conversations/{owned['cid']}/items/{owned['conv_item']}"
        assert "secret is 9" in json.dumps(_ok(stack, "GET", conv_item))
        for rid in (live, owned["running"]):
            assert _ok(stack, "POST", f"/v1/responses/{rid}/cancel")["status"] == "cancelled"


def test_across_replicas_a_foreign_id_reaches_nothing(
    random_model: Path, redis_server: RedisServer
) -> None:
    """Core b asked about jobs and streams core a runs: the board's cancel channel and claims."""
    url = redis_server.url(8)
    redis.Redis.from_url(url).flushdb()
    topo = Topology(random_model, url, api_keys=(OWNER, OTHER), isolate_keys=True)
    topo.start()
    try:
        model = topo.settings.models[0].name
        a, b = topo.url("a"), topo.url("b")
        body = {"model": model, "input": "go", "background": True, "max_output_tokens": 100_000}
        job = httpx.post(f"{a}/v1/responses", json=body, headers=_headers(OWNER), timeout=60)
        assert job.status_code == 200, job.text
        job_id = job.json()["id"]
        deadline = time.monotonic() + 60
        while "in_progress" not in _call(b, "GET", f"/v1/responses/{job_id}", None, OWNER)[1]:
            assert time.monotonic() < deadline, job_id
            time.sleep(0.05)
        cancelled = topo.cores["a"].models.default.runtime.worker.stats.cancelled
        with _live(a, model) as (live, _):
            for rid in (job_id, live):
                unknown = _unknown_response()
                for method, tail in (("POST", "/cancel"), ("GET", ""), ("GET", "?stream=true")):
                    path = "/v1/responses/{}" + tail
                    expected = _call(b, method, path.format(unknown), None, OTHER)
                    foreign = _call(b, method, path.format(rid), None, OTHER)
                    assert (foreign[0], foreign[1].replace(rid, "<id>")) == (
                        expected[0],
                        expected[1].replace(unknown, "<id>"),
                    ), (method, path, rid)
            core_a = topo.cores["a"]
            assert live in core_a.pipeline.in_flight and job_id in core_a.jobs.active
            assert core_a.models.default.runtime.worker.stats.cancelled == cancelled
            # The owner's own cancel still crosses to core a.
            for rid in (live, job_id):
                status, text = _call(b, "POST", f"/v1/responses/{rid}/cancel", None, OWNER)
                assert status == 200 and json.loads(text)["status"] == "cancelled", text
    finally:
        topo.stop()
