"""Routing by cache: affinity keys of requests and the pool's rendezvous choice of a core."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, cast

import grpc
from mlx_responses.http_facade.kit.affinity import Affinity
from mlx_responses.http_facade.kit.client import CoreClient
from mlx_responses.http_facade.kit.core_load import LoadCounter
from mlx_responses.http_facade.kit.core_pool import BUSY_SLACK, CorePool, PooledCore

from mlx_responses.v1 import responses_pb2 as pb
from tests.support.waits import until_async


class _Client:
    def __init__(self, name: str) -> None:
        self.name = name

    def connected(self) -> bool:
        return True


def _pool(n: int, *, by_cache: bool = True) -> CorePool:
    cores = [
        PooledCore(f"10.0.0.{i}:50051", cast(CoreClient, _Client(f"core{i}")), serving=True)
        for i in range(n)
    ]
    return CorePool(cores, by_cache=by_cache)


def _name(client: Any) -> str:
    return str(client.name)


def _message(role: int, text: str) -> pb.Item:
    part = pb.ContentPart(input_text=pb.InputText(text=text))
    return pb.Item(message=pb.MessageItem(role=cast(Any, role), content=[part]))


def _turn(history: list[str], **fields: Any) -> pb.CreateResponseParams:
    items = [_message(pb.ROLE_USER, t) for t in history]
    return pb.CreateResponseParams(model="m", input=items, instructions="sys", **fields)


def test_a_key_has_one_owner_and_keys_spread_over_the_cores() -> None:
    pool = _pool(3)
    assert len({_name(pool.pick("prefix:a")) for _ in range(20)}) == 1
    owners = Counter(_name(pool.pick(f"prefix:{i}")) for i in range(300))
    assert set(owners) == {"core0", "core1", "core2"}
    assert min(owners.values()) > 60  # about 100 each


def test_a_core_leaving_moves_only_its_own_keys() -> None:
    pool = _pool(3)
    keys = [f"prefix:{i}" for i in range(200)]
    before = {k: _name(pool.pick(k)) for k in keys}
    pool.cores[1].serving = False
    after = {k: _name(pool.pick(k)) for k in keys}
    moved = {k for k in keys if before[k] != after[k]}
    assert moved == {k for k in keys if before[k] == "core1"}
    assert "core1" not in after.values()
    pool.cores[1].serving = True  # back: its keys come back to it
    assert {k: _name(pool.pick(k)) for k in keys} == before


def test_a_busy_owner_spills_to_the_least_loaded_core() -> None:
    pool = _pool(2)
    owner = next(c for c in pool.cores if _name(c.client) == _name(pool.pick("prefix:x")))
    other = next(c for c in pool.cores if c is not owner)
    owner.load.in_flight = BUSY_SLACK
    assert pool.pick("prefix:x") is owner.client  # within the slack: still the owner
    owner.load.in_flight = BUSY_SLACK + 1
    assert pool.pick("prefix:x") is other.client
    other.load.in_flight = 3
    assert pool.pick("prefix:x") is owner.client


def test_requests_without_a_key_go_round_robin() -> None:
    pool = _pool(2)
    assert [_name(pool.pick()) for _ in range(4)] == ["core0", "core1", "core0", "core1"]
    plain = _pool(2, by_cache=False)  # --core-routing round_robin
    assert [_name(plain.pick("prefix:a")) for _ in range(4)] == ["core0", "core1"] * 2


def test_the_turns_of_a_chat_style_session_share_a_key() -> None:
    """A client that resends the history: every turn starts with the same items."""
    affinity = Affinity()
    one = affinity.key(_turn(["hi"]))
    two = affinity.key(_turn(["hi", "more", "and more"]))
    assert one == two and one.startswith("prefix:")
    assert affinity.key(_turn(["another session"])) != one
    assert affinity.key(_turn(["hi"], tools=[pb.Tool()])) != one  # other tools: other prefix


def test_a_chain_follows_its_first_turn() -> None:
    affinity = Affinity()
    first = affinity.key(_turn(["hi"]))
    affinity.remember("resp_1", first)
    second = _turn(["next"], previous_response_id="resp_1")
    assert affinity.key(second) == first
    affinity.remember("resp_2", affinity.key(second))
    assert affinity.key(_turn(["third"], previous_response_id="resp_2")) == first
    assert affinity.key(_turn(["x"], previous_response_id="resp_other")) == "response:resp_other"


def test_the_clients_key_and_a_conversation_name_the_prefix() -> None:
    affinity = Affinity()
    keyed = affinity.key(_turn(["hi"], prompt_cache_key="agent-7"))
    assert keyed == affinity.key(_turn(["other"], prompt_cache_key="agent-7"))
    assert keyed != affinity.key(_turn(["hi"], prompt_cache_key="agent-8"))
    assert affinity.key(_turn(["x"], conversation="conv_1")) == "conversation:conv_1"


def test_the_memo_is_bounded() -> None:
    affinity = Affinity(entries=2)
    for i in range(3):
        affinity.remember(f"resp_{i}", f"prefix:{i}")
    assert affinity.key(_turn(["x"], previous_response_id="resp_0")) == "response:resp_0"
    assert affinity.key(_turn(["x"], previous_response_id="resp_2")) == "prefix:2"


async def test_the_load_counter_counts_generation_calls_in_flight() -> None:
    """A streamed generation counts until it ends; other calls (health, storage) do not."""
    release = asyncio.Event()

    async def stream(request: bytes, context: Any) -> Any:
        yield b"first"
        await release.wait()

    async def unary(request: bytes, context: Any) -> bytes:
        return b"ok"

    handlers = {
        "StreamResponse": grpc.unary_stream_rpc_method_handler(stream),
        "GetResponse": grpc.unary_unary_rpc_method_handler(unary),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("mlx_responses.v1.GenerationService", handlers)]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    load = LoadCounter()
    try:
        address = f"127.0.0.1:{port}"
        async with grpc.aio.insecure_channel(address, interceptors=load.interceptors()) as channel:
            base = "/mlx_responses.v1.GenerationService/"
            assert await channel.unary_unary(base + "GetResponse")(b"") == b"ok"
            assert load.in_flight == 0
            call = channel.unary_stream(base + "StreamResponse")(b"")
            assert await call.read() == b"first"
            assert load.in_flight == 1
            release.set()
            assert await call.read() is grpc.aio.EOF
            # The call's done callback (run on the loop) releases it.
            await until_async(lambda: load.in_flight == 0, "the finished call released")
    finally:
        await server.stop(None)
