"""The façade's pool before its health watches have reported: a connected core is used."""

from __future__ import annotations

import asyncio
import socket

import grpc
from grpc_health.v1 import health, health_pb2_grpc
from mlx_responses.http_facade.kit.core_pool import CorePool


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _settle(channel: grpc.aio.Channel, want: grpc.ChannelConnectivity) -> None:
    state = channel.get_state(try_to_connect=True)
    while state != want:
        await asyncio.wait_for(channel.wait_for_state_change(state), 10)
        state = channel.get_state(try_to_connect=True)


async def test_a_connected_core_is_picked_while_the_watches_catch_up() -> None:
    """At startup the façade's channel to a core that was not listening yet waits out its
    reconnect backoff, and a call on it fails at once (503): before any watch says SERVING,
    requests go to the core whose channel is connected (it was round robin over all)."""
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    alive = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    pool = CorePool.connect([f"127.0.0.1:{_dead_port()}", f"127.0.0.1:{alive}"])
    try:
        dead_core, alive_core = pool.cores
        await _settle(alive_core.client.channel, grpc.ChannelConnectivity.READY)
        await _settle(dead_core.client.channel, grpc.ChannelConnectivity.TRANSIENT_FAILURE)
        assert not any(core.serving for core in pool.cores)  # no watch has run
        assert [pool.pick() for _ in range(4)] == [alive_core.client] * 4
        dead_core.serving = True  # a watch said so: the pool believes it
        assert pool.pick() is dead_core.client
    finally:
        await pool.close()
        await server.stop(None)
