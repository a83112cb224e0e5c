"""Several cores behind one façade: a channel each, grpc.health.v1 watches, cache affinity.

Each `--core` gets its own channel and a Health.Watch stream; requests go to the cores whose
health is SERVING, so a stopped, draining or still-loading core is routed around as soon as its
health says so. A request with an affinity key (http_facade/affinity.py: the prefix its prompt
starts with) goes to the key's owner by rendezvous hashing over the SERVING cores' addresses, so
every façade sends an agent's turns to the core that holds its prefix in cache, and a core
leaving moves only its own keys; while the owner has `BUSY_SLACK` more generation calls in
flight from this façade than the least loaded core, the least loaded one serves instead.
Requests without a key go round robin. When no watch has said SERVING yet (at startup), a core whose
channel is connected is used; when none is, the request still goes to one (round robin), so the
client gets that core's own 503. A `dns:///name:port` address (or a gRPC address list,
`ipv4:10.0.0.1:50051,10.0.0.2:50051`) is one channel with gRPC's built-in `round_robin` policy
and client-side health checking over every address the name resolves to. State lives in the
shared store, so any core can serve any turn; affinity only saves prefill.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mlx_responses.http_facade.kit.affinity import Affinity
from mlx_responses.http_facade.kit.client import CHANNEL_OPTIONS, CoreClient
from mlx_responses.http_facade.kit.core_load import LoadCounter

from mlx_responses.v1 import responses_pb2 as pb

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
# How many more generation calls than the least loaded core a key's owner may carry before
# its requests spill over (a burst on one shared prefix still spreads over the cores).
BUSY_SLACK = 4


def _score(key: str, address: str) -> int:
    """Rendezvous weight of (key, core): the highest-weighted serving core owns the key."""
    digest = hashlib.blake2b(f"{key}\0{address}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


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
    load: LoadCounter = field(default_factory=LoadCounter)


class CorePool:
    """Picks a healthy core per request."""

    def __init__(self, cores: list[PooledCore], *, by_cache: bool = True) -> None:
        if not cores:
            raise ValueError("at least one core address is needed")
        self.cores = cores
        self.by_cache = by_cache  # False: --core-routing round_robin
        self.affinity = Affinity()
        self._turn = itertools.count()
        self._watches: list[asyncio.Task[None]] = []

    @classmethod
    def connect(
        cls,
        addresses: Sequence[str],
        root_certificates: bytes | None = None,
        *,
        by_cache: bool = True,
    ) -> CorePool:
        """A pool with a fresh channel per address (TLS with `root_certificates`); call start()
        to watch health. `by_cache`: route by affinity key, else round robin."""
        cores = []
        for address in addresses:
            load = LoadCounter()
            client = CoreClient.connect(
                address, root_certificates, channel_options(address), load.interceptors()
            )
            cores.append(PooledCore(address, client, load=load))
        return cls(cores, by_cache=by_cache)

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

    def healthy(self) -> list[PooledCore]:
        """The SERVING cores (when no watch has said so yet, the connected ones, else all)."""
        return (
            [c for c in self.cores if c.serving]
            or [c for c in self.cores if c.client.connected()]
            or self.cores
        )

    def pick(self, affinity: str | None = None) -> CoreClient:
        """The core for a request: among the SERVING cores (when no watch has said so yet, the
        cores whose channel is connected, else all), the owner of `affinity` unless it is busy,
        else the next one round robin.

        At startup a channel that tried a core before it listened waits out its reconnect
        backoff, and a call on it fails at once with UNAVAILABLE: while the watches catch up,
        a core a request already reached is the one to use.
        """
        healthy = self.healthy()
        if affinity is None or not self.by_cache or len(healthy) == 1:
            return healthy[next(self._turn) % len(healthy)].client
        owner = max(healthy, key=lambda c: _score(affinity, c.address))
        least = min(c.load.in_flight for c in healthy)
        if owner.load.in_flight <= least + BUSY_SLACK:
            return owner.client
        idle = [c for c in healthy if c.load.in_flight == least]
        return max(idle, key=lambda c: _score(affinity, c.address)).client

    def route(self, params: pb.CreateResponseParams) -> tuple[CoreClient, str]:
        """The core for a create (or count) request, and the affinity key it was routed by."""
        key = self.affinity.key(params)
        return self.pick(key), key

    def created(self, key: str, response_id: str) -> None:
        """A response made under `key`: a turn chained on it goes where it went."""
        self.affinity.remember(response_id, key)

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
