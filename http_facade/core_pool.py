"""Several cores behind one façade: a channel each, grpc.health.v1 watches, round robin.

Each `--core` gets its own channel and a Health.Watch stream; requests go round robin over the
cores whose health is SERVING, so a stopped, draining or still-loading core is routed around as
soon as its health says so. When no watch has said SERVING yet (at startup), a core whose
channel is connected is used; when none is, the request still goes to one (round robin), so the
client gets that core's own 503. A `dns:///name:port` address (or a gRPC address list,
`ipv4:10.0.0.1:50051,10.0.0.2:50051`) is one channel with gRPC's built-in `round_robin` policy
and client-side health checking over every address the name resolves to. State lives in the
shared store, so consecutive turns of a chain may land on any core.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mlx_responses.http_facade.client import CHANNEL_OPTIONS, CoreClient

log = logging.getLogger(__name__)

# A name resolving to several cores: gRPC balances over the SERVING ones itself.
BALANCED_SERVICE_CONFIG = json.dumps(
    {"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}}
)
# A restarted core is found again within about this long.
RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
WATCH_RETRY_S = 0.5
BALANCED_SCHEMES = ("dns:", "ipv4:", "ipv6:")


def channel_options(address: str) -> list[tuple[str, object]]:
    """Options of the channel to one `--core` value."""
    options: list[tuple[str, object]] = [*CHANNEL_OPTIONS, *RECONNECT_OPTIONS]
    if address.startswith(BALANCED_SCHEMES):
        options.append(("grpc.service_config", BALANCED_SERVICE_CONFIG))
    return options


@dataclass
class PooledCore:
    """One core address, its client and what its health service last said."""

    address: str
    client: CoreClient
    serving: bool = False


class CorePool:
    """Picks a healthy core per request."""

    def __init__(self, cores: list[PooledCore]) -> None:
        if not cores:
            raise ValueError("at least one core address is needed")
        self.cores = cores
        self._turn = itertools.count()
        self._watches: list[asyncio.Task[None]] = []

    @classmethod
    def connect(cls, addresses: Sequence[str], root_certificates: bytes | None = None) -> CorePool:
        """A pool with a fresh channel per address (TLS with `root_certificates`); call start()
        to watch health."""
        return cls(
            [
                PooledCore(a, CoreClient.connect(a, root_certificates, channel_options(a)))
                for a in addresses
            ]
        )

    async def start(self) -> None:
        """Starts one Health.Watch per core."""
        self._watches = [
            asyncio.create_task(self._watch(core), name=f"health-{core.address}")
            for core in self.cores
        ]

    async def _watch(self, core: PooledCore) -> None:
        stub = health_pb2_grpc.HealthStub(core.client.channel)
        while True:
            try:
                async for reply in stub.Watch(health_pb2.HealthCheckRequest(service="")):
                    serving = reply.status == health_pb2.HealthCheckResponse.SERVING
                    if serving != core.serving:
                        log.info("core %s serving: %s", core.address, serving)
                    core.serving = serving
            except grpc.aio.AioRpcError:
                pass
            if core.serving:
                log.warning("core %s unreachable", core.address)
            core.serving = False
            await asyncio.sleep(WATCH_RETRY_S)

    def pick(self) -> CoreClient:
        """The next SERVING core (round robin); when no watch has said so yet, the next core
        whose channel is connected, else the next core at all.

        At startup a channel that tried a core before it listened waits out its reconnect
        backoff, and a call on it fails at once with UNAVAILABLE: while the watches catch up,
        a core a request already reached is the one to use.
        """
        healthy = (
            [c for c in self.cores if c.serving]
            or [c for c in self.cores if c.client.connected()]
            or self.cores
        )
        return healthy[next(self._turn) % len(healthy)].client

    async def serving(self) -> bool:
        """Whether any core's health service reports SERVING now."""
        answers = await asyncio.gather(*(c.client.serving() for c in self.cores))
        return any(answers)

    async def close(self) -> None:
        """Stops the watches and closes every channel."""
        for task in self._watches:
            task.cancel()
        for task in self._watches:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for core in self.cores:
            await core.client.close()
