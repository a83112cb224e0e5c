"""Two cores sharing a real redis-server behind façades: state crosses replicas, Redis can restart.

Façade `a` reaches only core a and façade `b` only core b, so a request sent through one and
continued through the other crosses replicas by construction; façade `pool` has both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2

from mlx_responses.v1 import jobs_service_pb2 as jobs
from mlx_responses.v1 import jobs_service_pb2_grpc as jobs_grpc
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st
from mlx_responses.v1 import storage_service_pb2_grpc as st_grpc
from tests.support.redis_server import RedisServer
from tests.support.topology import Topology
from tests.support.waits import until


@pytest.fixture(scope="module")
def topo(random_model: Path, redis_server: RedisServer) -> Iterator[Topology]:
    # db 1: apart from the store suite's namespaces in db 0.
    topology = Topology(random_model, redis_server.url(1))
    topology.start()
    yield topology
    topology.stop()


def _post(topo: Topology, facade: str, path: str = "/v1/responses", **body: Any) -> httpx.Response:
    body = {"model": topo.settings.models[0].name, "temperature": 0, **body}
    return httpx.post(f"{topo.url(facade)}{path}", json=body, timeout=60)


def _turn(topo: Topology, facade: str, **body: Any) -> dict[str, Any]:
    reply = _post(topo, facade, **{"input": "go", "max_output_tokens": 3, **body})
    assert reply.status_code == 200, reply.text
    return reply.json()


def _input_tokens(topo: Topology, facade: str, **body: Any) -> int:
    reply = _post(topo, facade, "/v1/responses/input_tokens", input="go", **body)
    assert reply.status_code == 200, reply.text
    return int(reply.json()["input_tokens"])


def _served_by(topo: Topology, facade: str, **body: Any) -> tuple[dict[str, Any], str]:
    before = {name: topo.generated(name) for name in ("a", "b")}
    answer = _turn(topo, facade, **body)
    grew = [name for name in ("a", "b") if topo.generated(name) > before[name]]
    assert len(grew) == 1, grew
    return answer, grew[0]


def _poll(topo: Topology, facade: str, rid: str, until: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = httpx.get(f"{topo.url(facade)}/v1/responses/{rid}", timeout=30).json()
        if body["status"] in until:
            return body
        time.sleep(0.02)
    raise AssertionError(f"{rid} never reached {until}")


def test_chain_crosses_replicas(topo: Topology) -> None:
    first, core = _served_by(topo, "a", input="Reply with: hello")
    assert core == "a"
    fetched = httpx.get(f"{topo.url('b')}/v1/responses/{first['id']}", timeout=30).json()
    assert fetched["id"] == first["id"] and fetched["output"] == first["output"]
    second, core = _served_by(topo, "b", previous_response_id=first["id"])
    assert core == "b" and second["previous_response_id"] == first["id"]
    # Core b rendered core a's turn as history.
    chained = _input_tokens(topo, "b", previous_response_id=first["id"])
    assert chained > _input_tokens(topo, "b")
    # And back: a third turn on core a continues core b's.
    third, core = _served_by(topo, "a", previous_response_id=second["id"])
    assert core == "a"
    assert _input_tokens(topo, "a", previous_response_id=third["id"]) > chained


def test_conversation_crosses_replicas(topo: Topology) -> None:
    _turn(topo, "a", input="Reply with: cat", conversation="conv_scale")
    _turn(topo, "b", input="Reply with: dog", conversation="conv_scale")
    for name in ("a", "b"):
        with grpc.insecure_channel(f"127.0.0.1:{topo.servers[name].port}") as channel:
            reply = st_grpc.StorageServiceStub(channel).GetConversation(
                st.GetConversationRequest(id="conv_scale"), timeout=10
            )
        texts = [i.message.content[0].input_text.text for i in reply.items if i.message.role == 1]
        assert texts == ["Reply with: cat", "Reply with: dog"]
        assert len(reply.items) == 4  # two inputs, two outputs


def test_background_poll_crosses_replicas(topo: Topology) -> None:
    job = _post(topo, "a", input="go", background=True, max_output_tokens=40).json()
    assert job["status"] == "queued"
    final = _poll(topo, "b", job["id"], {"completed", "incomplete", "failed"})
    assert final["status"] == "incomplete" and final["background"] is True
    assert final["usage"]["output_tokens"] == 40
    again = httpx.get(f"{topo.url('a')}/v1/responses/{job['id']}", timeout=30).json()
    assert again == final


def test_watch_job_on_another_replica_ends_with_the_final_snapshot(topo: Topology) -> None:
    job = _post(topo, "a", input="go", background=True, max_output_tokens=30).json()
    with grpc.insecure_channel(f"127.0.0.1:{topo.servers['b'].port}") as channel:
        watch = jobs_grpc.JobsServiceStub(channel).WatchJob(
            jobs.WatchJobRequest(id=job["id"]), timeout=60
        )
        replies = list(watch)
    final = replies[-1].events[-1].snapshot.response
    assert final.id == job["id"] and final.status == pb.RESPONSE_STATUS_INCOMPLETE
    assert final.usage.output_tokens == 30


def _sse(url: str, **params: Any) -> list[dict[str, Any]]:
    with httpx.stream("GET", url, params={"stream": "true", **params}, timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        return [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: ")]


def test_a_background_stream_is_followed_and_resumed_on_another_replica(topo: Topology) -> None:
    job = _post(topo, "a", input="go", background=True, max_output_tokens=300).json()
    url_b = f"{topo.url('b')}/v1/responses/{job['id']}"
    # Core b follows core a's job live through the shared event log.
    assert httpx.get(url_b, timeout=30).json()["status"] in ("queued", "in_progress")
    followed = _sse(url_b)
    assert [e["sequence_number"] for e in followed] == list(range(len(followed)))
    assert followed[-1]["type"] == "response.incomplete"
    assert followed[-1]["response"]["usage"]["output_tokens"] == 300
    # Resumed on either replica: the same events, the same sequence numbers.
    assert _sse(f"{topo.url('a')}/v1/responses/{job['id']}", starting_after=10) == followed[11:]
    assert _sse(url_b, starting_after=len(followed) - 1) == []
    reply = httpx.get(url_b, params={"stream": "true", "starting_after": len(followed)})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "starting_after"


def test_conversation_objects_cross_replicas(topo: Topology) -> None:
    created = _post(topo, "a", "/v1/conversations", metadata={"k": "v"}).json()
    assert created["id"].startswith("conv_")
    _turn(topo, "b", input="Reply with: cat", conversation=created["id"])
    url_a = f"{topo.url('a')}/v1/conversations/{created['id']}"
    assert httpx.get(url_a, timeout=30).json() == created
    items = httpx.get(f"{url_a}/items", params={"order": "asc"}, timeout=30).json()["data"]
    assert [item["role"] for item in items] == ["user", "assistant"]


def test_cancel_crosses_replicas(topo: Topology) -> None:
    job = _post(topo, "a", input="go", background=True, max_output_tokens=100000).json()
    rid = job["id"]
    _poll(topo, "b", rid, {"in_progress"})
    # Core b knows the job runs elsewhere: no chaining, no delete.
    refused = _post(topo, "b", input="x", previous_response_id=rid)
    assert refused.status_code == 400 and "has not finished" in refused.json()["error"]["message"]
    deleted = httpx.delete(f"{topo.url('b')}/v1/responses/{rid}", timeout=30)
    assert deleted.status_code == 400 and "cancel it first" in deleted.json()["error"]["message"]
    cancelled_before = topo.cores["a"].models.default.runtime.worker.stats.cancelled
    reply = httpx.post(f"{topo.url('b')}/v1/responses/{rid}/cancel", timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "cancelled" and reply.json()["background"] is True
    # The engine of core a stopped the sequence.
    assert topo.cores["a"].models.default.runtime.worker.stats.cancelled == cancelled_before + 1
    assert not topo.cores["a"].jobs.active
    generated = topo.generated("a")
    time.sleep(0.2)
    assert topo.generated("a") == generated
    assert _poll(topo, "a", rid, {"cancelled"})["id"] == rid


@pytest.mark.parametrize("store", [True, False])
def test_cancel_of_a_foreground_stream_crosses_replicas(topo: Topology, store: bool) -> None:
    body = {"model": topo.settings.models[0].name, "input": "go", "stream": True,
            "max_output_tokens": 100000, "store": store}  # fmt: skip
    cancelled_before = topo.cores["a"].models.default.runtime.worker.stats.cancelled
    url = f"{topo.url('a')}/v1/responses"
    with httpx.stream("POST", url, json=body, timeout=60) as stream:
        lines = (json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: "))
        created = next(lines)
        assert created["type"] == "response.created"
        rid = created["response"]["id"]
        assert next(lines)["type"] == "response.in_progress"
        # Core b runs nothing under that id: the cancel crosses to core a through Redis.
        assert rid not in topo.cores["b"].pipeline.in_flight
        reply = httpx.post(f"{topo.url('b')}/v1/responses/{rid}/cancel", timeout=60)
        rest = list(lines)
    assert reply.status_code == 200, reply.text
    final = reply.json()
    assert (final["id"], final["status"]) == (rid, "cancelled")
    assert rest[-1]["type"] == "response.failed" and rest[-1]["response"] == final
    assert topo.cores["a"].models.default.runtime.worker.stats.cancelled == cancelled_before + 1
    assert rid not in topo.cores["a"].pipeline.in_flight
    assert not topo.cores["a"].jobs.foreground.claims
    stored = httpx.get(f"{topo.url('b')}/v1/responses/{rid}", timeout=30)
    assert stored.status_code == (200 if store else 404)
    # A cancel of an id no replica runs stays a 404.
    unknown = httpx.post(f"{topo.url('b')}/v1/responses/resp_nothing/cancel", timeout=30)
    assert unknown.status_code == 404


def _metrics(topo: Topology, name: str) -> str:
    return httpx.get(f"{topo.url(name)}/metrics", timeout=10).text


def test_pool_routes_by_cache_around_an_unhealthy_core(topo: Topology) -> None:
    """--core-routing cache (the default): one prompt start, one core; a chain follows its
    first turn; a core that stops serving hands its prompts to the other and gets them back."""
    pool = topo.pool()
    until(lambda: all(core.serving for core in pool.cores), "every core serves")
    starts = [f"go {i}" for i in range(16)]
    owners = {start: _served_by(topo, "pool", input=start)[1] for start in starts}
    assert set(owners.values()) == {"a", "b"}  # 16 prompt starts spread over both cores
    assert [_served_by(topo, "pool", input=starts[0])[1] for _ in range(3)] == [
        owners[starts[0]]
    ] * 3
    # A chain through the pool goes where its first turn went, and still resolves.
    first, where = _served_by(topo, "pool", input="chain start")
    chained = _served_by(topo, "pool", input="next", previous_response_id=first["id"])
    assert chained[1] == where

    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
    topo.run(topo.servers["a"].health.set("", not_serving))
    try:
        # The façade's /metrics reports what its health watch saw.
        down = f'mlx_responses_core_serving{{core="{pool.cores[0].address}"}} 0.0'
        until(lambda: down in _metrics(topo, "pool"), "the pool reports core a not serving")
        assert f'core_serving{{core="{pool.cores[1].address}"}} 1.0' in _metrics(topo, "pool")
        moved = [s for s in starts if owners[s] == "a"][:3]
        assert [_served_by(topo, "pool", input=s)[1] for s in moved] == ["b"] * len(moved)
        assert httpx.get(f"{topo.url('pool')}/health", timeout=10).status_code == 200
    finally:
        topo.run(topo.servers["a"].set_serving())
    until(lambda: pool.cores[0].serving, "the pool sees core a serving again")
    assert {s: _served_by(topo, "pool", input=s)[1] for s in starts[:6]} == {
        s: owners[s] for s in starts[:6]
    }


def _unavailable(reply: httpx.Response) -> None:
    assert reply.status_code == 503, reply.text
    error = reply.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "store_unavailable"
    assert "Redis" in error["message"]


def test_redis_restart_gives_503s_then_recovers(topo: Topology, redis_server: RedisServer) -> None:
    before = _turn(topo, "a")
    redis_server.stop()
    try:
        _unavailable(httpx.get(f"{topo.url('b')}/v1/responses/{before['id']}", timeout=30))
        _unavailable(_post(topo, "b", input="x", previous_response_id=before["id"]))
        _unavailable(_post(topo, "a", input="x", conversation="conv_down"))
        _unavailable(_post(topo, "a", input="x", background=True))
        # One that cannot be stored fails fast: refused before it generates, streamed or not.
        generated = topo.generated("a")
        _unavailable(_post(topo, "a", input="x", max_output_tokens=2))
        _unavailable(_post(topo, "a", input="x", max_output_tokens=2, stream=True))
        assert topo.generated("a") == generated
        # A request that needs no store still works.
        assert _post(topo, "a", input="x", max_output_tokens=2, store=False).status_code == 200
    finally:
        redis_server.start()
    # Recovery: the clients reconnect by themselves; data survived (append-only file).
    fetched = httpx.get(f"{topo.url('b')}/v1/responses/{before['id']}", timeout=30)
    assert fetched.status_code == 200 and fetched.json()["id"] == before["id"]
    _served_by(topo, "b", previous_response_id=before["id"])
    job = _post(topo, "b", input="go", background=True, max_output_tokens=5).json()
    assert _poll(topo, "a", job["id"], {"incomplete"})["usage"]["output_tokens"] == 5
    # A cancel still crosses replicas (pub/sub resubscribed, or the heartbeat's cancel key).
    long = _post(topo, "b", input="go", background=True, max_output_tokens=100000).json()
    _poll(topo, "a", long["id"], {"in_progress"})
    cancelled = httpx.post(f"{topo.url('a')}/v1/responses/{long['id']}/cancel", timeout=60)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


def test_redis_lost_during_generation_fails_at_the_final_write(
    topo: Topology, redis_server: RedisServer
) -> None:
    body = {"model": topo.settings.models[0].name, "input": "go", "stream": True,
            "max_output_tokens": 1000}  # fmt: skip
    try:
        with httpx.stream("POST", f"{topo.url('a')}/v1/responses", json=body, timeout=60) as s:
            lines = (json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: "))
            assert next(lines)["type"] == "response.created"
            # Reachable at admission; gone before the final write.
            redis_server.stop()
            rest = list(lines)
    finally:
        if not redis_server.ping():
            redis_server.start()
    last = rest[-1]
    assert last["type"] == "response.failed", last["type"]
    failed = last["response"]
    assert failed["status"] == "failed" and "Redis" in failed["error"]["message"]
    # Nothing half-written: the store answers again, without the failed response.
    missing = httpx.get(f"{topo.url('b')}/v1/responses/{failed['id']}", timeout=30)
    assert missing.status_code == 404
    assert _post(topo, "b", input="x", max_output_tokens=2).status_code == 200


def test_background_limits_hold_across_replicas(
    random_model: Path, redis_server: RedisServer
) -> None:
    # Per core, each would admit 2 jobs and 3000 bytes of them; together they admit that much.
    limited = Topology(
        random_model,
        redis_server.url(4),
        responses_background_max_jobs=2,
        responses_store_max_bytes=3000,
    )
    limited.start()
    try:

        def job(facade: str, **body: Any) -> httpx.Response:
            body = {"input": "go", "background": True, "max_output_tokens": 100000, **body}
            return _post(limited, facade, **body)

        def cancel(rid: str) -> None:
            reply = httpx.post(f"{limited.url('b')}/v1/responses/{rid}/cancel", timeout=60)
            # A final object over the small budget is kept as a failed stub (seed).
            assert reply.status_code == 200, reply.text
            assert reply.json()["status"] in ("cancelled", "failed"), reply.text

        def refused(reply: httpx.Response, says: str) -> None:
            assert reply.status_code == 429, reply.text
            error = reply.json()["error"]
            assert error["code"] == "rate_limit_exceeded" and says in error["message"]

        first, second = job("a").json(), job("b").json()
        refused(job("a"), "2 background jobs are already active")
        refused(job("b"), "2 background jobs are already active")
        cancel(first["id"])  # asked of core b, run by core a
        third = job("a")
        assert third.status_code == 200, third.text
        cancel(second["id"])
        cancel(third.json()["id"])
        # The byte budget: a big job on core a leaves no room for another on core b.
        big = job("a", input="word " * 300)
        assert big.status_code == 200, big.text
        refused(job("b", input="word " * 300), "byte budget")
        small = job("b")
        assert small.status_code == 200, small.text
        cancel(big.json()["id"])
        cancel(small.json()["id"])
    finally:
        limited.stop()


def test_one_balanced_address_uses_grpc_round_robin_and_health(topo: Topology) -> None:
    from mlx_responses.http_facade.app import start_facade
    from mlx_responses.http_facade.config import FacadeSettings

    a, b = topo.servers["a"].port, topo.servers["b"].port
    target = f"ipv4:127.0.0.1:{a},127.0.0.1:{b}"
    runner, port = topo.run(start_facade([target], FacadeSettings(host="127.0.0.1", port=0)))
    topo.ports["balanced"] = port
    try:
        served = [_served_by(topo, "balanced")[1] for _ in range(4)]
        assert sorted(served) == ["a", "a", "b", "b"]
        # gRPC's client-side health check drops core a from the rotation.
        topo.run(topo.servers["a"].health.set("", health_pb2.HealthCheckResponse.NOT_SERVING))
        # The health update reaches the channel's own watch (however long that takes here):
        # two calls in a row on b, which the rotation never gives while a is in it.
        recent = [_served_by(topo, "balanced")[1] for _ in range(2)]
        while recent[-2:] != ["b", "b"]:
            assert len(recent) < 1000, recent[-10:]  # a guard against a hang
            time.sleep(0.01)
            recent.append(_served_by(topo, "balanced")[1])
        assert [_served_by(topo, "balanced")[1] for _ in range(3)] == ["b", "b", "b"]
    finally:
        topo.run(topo.servers["a"].set_serving())
        topo.run(runner.cleanup())


def test_affinity_survives_a_core_leaving(random_model: Path, redis_server: RedisServer) -> None:
    """Three cores; core a shuts down (its process leaves: the pool's health watch breaks).
    The prompts cores b and c owned stay where they were and go on reading their prefix from
    that core's cache; core a's move to the others, and read from their cache from their next
    turn on."""
    topo = Topology(random_model, redis_server.url(5), names=("a", "b", "c"))
    topo.start()
    try:
        pool = topo.pool()
        until(lambda: all(core.serving for core in pool.cores), "every core serves")

        def served(start: str, names: tuple[str, ...]) -> tuple[str, int]:
            before = {name: topo.generated(name) for name in names}
            answer = _turn(topo, "pool", input=start)
            grew = [name for name in names if topo.generated(name) > before[name]]
            assert len(grew) == 1, grew
            return grew[0], int(answer["usage"]["input_tokens_details"]["cached_tokens"])

        starts = [f"Tell me the story of the lighthouse number {i}, slowly." for i in range(18)]
        owners = {start: served(start, topo.names)[0] for start in starts}
        assert set(owners.values()) == {"a", "b", "c"}
        topo.run(topo.servers.pop("a").shutdown(1))
        until(lambda: not pool.cores[0].serving, "the pool sees core a gone")

        for start in starts:
            where, read = served(start, ("b", "c"))
            if owners[start] != "a":
                # Its owner, and its prompt still in that cache: an exact repeat reads all but
                # its last token.
                count = _post(topo, "b", "/v1/responses/input_tokens", input=start).json()
                assert (where, read) == (owners[start], count["input_tokens"] - 1)
            else:
                # Its new owner never saw it (it reads what it shares with its own prompts)
                # and keeps it now.
                again, more = served(start, ("b", "c"))
                assert again == where and more > read
    finally:
        topo.stop()
