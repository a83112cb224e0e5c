"""Store benchmark: the Redis backend vs. the in-memory one, per operation and per HTTP turn.

Starts its own redis-server on a free port (append-only, as the README recommends), then in one
run measures: put+get pairs of a stored response (store level), and sequential one-token
chained turns through a full core + façade stack on each backend (HTTP level, bundled model).
Prints figures and ratios against the memory baseline of the same run. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from mlx_responses.service.engine.blas import preload_blas  # noqa: E402

preload_blas()

from mlx_responses.service.config import BUNDLED_MODEL  # noqa: E402
from mlx_responses.service.stores.base import ResponseStore, StoredResponse  # noqa: E402
from mlx_responses.service.stores.memory import InMemoryResponseStore  # noqa: E402
from mlx_responses.service.stores.redis_store import RedisBoundedMap, RedisResponseStore, connect  # noqa: E402

from mlx_responses.v1 import responses_pb2 as pb  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402
from tests.support.stack import Stack  # noqa: E402


def _stored(rid: str, items: int) -> StoredResponse:
    text = "The quick brown fox jumps over the lazy dog. " * 4
    context = [
        pb.Item(
            message=pb.MessageItem(
                role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text=text))]
            )
        )
        for _ in range(items)
    ]
    return StoredResponse(response=pb.Response(id=rid, store=True), context=context)


async def _store_ops(store: ResponseStore, n: int, items: int) -> float:
    """put+get pairs per second."""
    payloads = [_stored(f"resp_{i}", items) for i in range(n)]
    start = time.perf_counter()
    for stored in payloads:
        await store.put(stored)
        await store.get(stored.response.id)
    return n / (time.perf_counter() - start)


async def _store_level(url: str, n: int, items: int) -> tuple[float, float, int]:
    memory = await _store_ops(InMemoryResponseStore(100_000, 1 << 30, 3600), n, items)
    client = connect(url)
    bounded = RedisBoundedMap(client, f"bench-{uuid.uuid4().hex[:6]}", 100_000, 1 << 30, 3600)
    redis = await _store_ops(RedisResponseStore(bounded), n, items)
    await client.aclose()
    return memory, redis, _stored("x", items).nbytes()


def _turns(stack: Stack, n: int) -> list[float]:
    """Latency of sequential chained one-token turns (each reads and writes the store)."""
    body = {"model": stack.settings.models[0].name, "max_output_tokens": 1, "input": "go"}
    with httpx.Client(base_url=stack.base_url, timeout=60) as client:
        previous = client.post("/v1/responses", json=body).json()["id"]
        times = []
        for _ in range(n):
            start = time.perf_counter()
            reply = client.post("/v1/responses", json={**body, "previous_response_id": previous})
            times.append(time.perf_counter() - start)
            reply.raise_for_status()
            previous = reply.json()["id"]
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=2000, help="put+get pairs per backend")
    parser.add_argument("--items", type=int, default=20, help="context items per response")
    parser.add_argument("--turns", type=int, default=40, help="chained HTTP turns per backend")
    args = parser.parse_args()
    binary = shutil.which("redis-server")
    if binary is None:
        print("bench_stores: redis-server is not installed (make setup installs it)")
        return 1
    with tempfile.TemporaryDirectory() as folder:
        server = RedisServer(binary, Path(folder))
        server.start()
        try:
            memory, redis, nbytes = asyncio.run(_store_level(server.url(), args.ops, args.items))
            print(f"store put+get pairs/s ({nbytes} B responses): memory {memory:,.0f}, "
                  f"redis {redis:,.0f} (ratio {redis / memory:.3f})")  # fmt: skip
            latency = {}
            for name, url in (("memory", "memory"), ("redis", server.url(1))):
                with Stack.running(BUNDLED_MODEL, store_url=url) as stack:
                    _turns(stack, 5)  # warm up
                    latency[name] = statistics.median(_turns(stack, args.turns)) * 1000
            ratio = latency["redis"] / latency["memory"]
            print(f"chained 1-token turn p50: memory {latency['memory']:.1f} ms, "
                  f"redis {latency['redis']:.1f} ms (ratio {ratio:.2f})")  # fmt: skip
            print(f"bench_stores: store_ops_ratio={redis / memory:.3f} "
                  f"turn_latency_ratio={ratio:.2f}")  # fmt: skip
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
