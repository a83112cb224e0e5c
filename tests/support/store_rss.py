"""Measures the RSS growth of 10,000 stored responses in the in-memory store (run as a script).

A fresh process, so other tests' heap does not hide or inflate the growth. Prints JSON.
"""

from __future__ import annotations

import asyncio
import gc
import json
import secrets
import sys
from pathlib import Path

from mlx_responses.service.stores.base import StoredResponse
from mlx_responses.service.stores.memory import InMemoryResponseStore

from mlx_responses.v1 import responses_pb2 as pb


def rss_bytes() -> int:
    """The resident set size of this process (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def stored_response(i: int, words: int) -> StoredResponse:
    """A response like a generated one: a prompt, an answer of `words` words, usage, metadata."""
    answer = " ".join(secrets.token_urlsafe(6) for _ in range(words))
    response = pb.Response(
        id=f"resp_{secrets.token_hex(24)}",
        created_at=1_800_000_000 + i,
        completed_at=1_800_000_001 + i,
        status=pb.RESPONSE_STATUS_COMPLETED,
        model="random-chat",
        temperature=1.0,
        top_p=1.0,
        store=True,
        usage=pb.Usage(input_tokens=40, output_tokens=words, total_tokens=40 + words),
        instructions="You are a helpful assistant.",
    )
    response.metadata["request"] = str(i)
    response.output.add().message.CopyFrom(
        pb.MessageItem(
            id=f"msg_{secrets.token_hex(24)}",
            role=pb.ROLE_ASSISTANT,
            status=pb.ITEM_STATUS_COMPLETED,
            content=[pb.ContentPart(output_text=pb.OutputText(text=answer))],
        )
    )
    prompt = pb.Item(
        message=pb.MessageItem(
            role=pb.ROLE_USER,
            content=[pb.ContentPart(input_text=pb.InputText(text=f"question {i}: {answer[:80]}"))],
        )
    )
    return StoredResponse(response=response, context=[prompt, response.output[0]])


async def measure(count: int, budget: int, words: int) -> dict[str, float]:
    store = InMemoryResponseStore(max_entries=count * 2, max_bytes=budget, ttl_secs=3600)
    stored_response(0, words)
    gc.collect()
    before = rss_bytes()
    serialized = 0
    for i in range(count):
        item = stored_response(i, words)
        serialized += item.nbytes()
        await store.put(item)
    gc.collect()
    after = rss_bytes()
    occupancy = await store.occupancy()
    return {
        "count": count,
        "budget": budget,
        "serialized_put": serialized,
        "entries_kept": occupancy.entries,
        "bytes_kept": occupancy.bytes,
        "rss_growth": after - before,
    }


if __name__ == "__main__":
    count, budget, words = (int(a) for a in sys.argv[1:4])
    print(json.dumps(asyncio.run(measure(count, budget, words))))
