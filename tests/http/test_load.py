"""Load: 64 concurrent streams plus 16 background jobs on a random model, all terminal, no gaps."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx

STREAMS = 64
JOBS = 16
TERMINAL = {"completed", "incomplete", "failed", "cancelled"}
# A deadlock shows as this timeout, not as a hung suite.
DEADLINE_S = 240.0


async def _stream(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with client.stream("POST", "/v1/responses", json=body) as reply:
        assert reply.status_code == 200, await reply.aread()
        buffer = ""
        async for chunk in reply.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                events.append(json.loads(frame.split("\n")[1][len("data: ") :]))
    return events


async def _job(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    created = await client.post("/v1/responses", json={**body, "background": True})
    assert created.status_code == 200, created.text
    response_id = created.json()["id"]
    while True:
        polled = (await client.get(f"/v1/responses/{response_id}")).json()
        if polled["status"] in TERMINAL:
            return dict(polled)
        await asyncio.sleep(0.1)


async def _load(base_url: str, model: str) -> tuple[list[list[dict[str, Any]]], list[Any]]:
    limits = httpx.Limits(max_connections=STREAMS + JOBS + 8)
    async with httpx.AsyncClient(base_url=base_url, timeout=DEADLINE_S, limits=limits) as client:
        body = {"model": model, "input": "load", "max_output_tokens": 12, "temperature": 1.0}
        streams = [_stream(client, {**body, "stream": True}) for _ in range(STREAMS)]
        jobs = [_job(client, body) for _ in range(JOBS)]
        results = await asyncio.wait_for(asyncio.gather(*streams, *jobs), DEADLINE_S)
    return list(results[:STREAMS]), list(results[STREAMS:])


def test_64_streams_and_16_jobs_all_terminal(make_stack: Any, random_model: Path) -> None:
    # Queue room for everything at once: the test is about correctness, not admission.
    stack = make_stack(random_model, max_batch_size=16, max_queued_requests=STREAMS + JOBS)
    began = time.monotonic()
    streams, jobs = asyncio.run(_load(stack.base_url, random_model.name))
    elapsed = time.monotonic() - began
    ids = set()
    for events in streams:
        assert events, "an empty stream"
        numbers = [e["sequence_number"] for e in events]
        assert numbers == list(range(len(events))), "sequence numbers with a gap"
        last = events[-1]
        assert last["type"] in {"response.completed", "response.incomplete"}, last["type"]
        assert last["response"]["status"] in TERMINAL
        ids.add(last["response"]["id"])
    for job in jobs:
        assert job["status"] in {"completed", "incomplete"}, job
        ids.add(job["id"])
    assert len(ids) == STREAMS + JOBS, "two requests shared a response id"
    stats = stack.engine_stats
    assert stats.active == 0, "a batch slot stayed taken"
    print(f"load: {STREAMS} streams + {JOBS} jobs terminal in {elapsed:.1f}s")
