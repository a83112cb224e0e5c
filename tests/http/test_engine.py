"""Engine behaviour seen from HTTP: continuous batching, the bounded queue, the prompt cache."""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.hold import held_until
from tests.support.stack import Stack
from tests.support.waits import until


def _stream(stack: Stack, tokens: int, results: list[dict[str, Any]]) -> None:
    body = {
        "model": stack.settings.models[0].name,
        "input": "count",
        "stream": True,
        "max_output_tokens": tokens,
        "temperature": 0,
    }
    with httpx.stream("POST", f"{stack.base_url}/v1/responses", json=body, timeout=120) as reply:
        lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
    results.append({"status": reply.status_code, "last": lines[-1] if lines else ""})


def test_concurrent_streams_decode_in_one_batch(random_stack: Stack) -> None:
    results: list[dict[str, Any]] = []
    threads = [threading.Thread(target=_stream, args=(random_stack, 96, results)) for _ in range(4)]
    assert random_stack.core is not None
    random_stack.engine_stats.max_batch_seen = 0  # the stack's earlier tests' is not ours
    # Held until all four have arrived, so they are admitted together however slow the machine.
    with held_until(random_stack.core.models.default.runtime.worker, 4):
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert [r["status"] for r in results] == [200] * 4
    assert all('"response.incomplete"' in r["last"] for r in results)
    assert random_stack.engine_stats.max_batch_seen == 4


def test_full_queue_answers_503(make_stack: Any, random_model: Path) -> None:
    stack = make_stack(model=random_model, max_batch_size=1, max_queued_requests=0)
    results: list[dict[str, Any]] = []
    runner = threading.Thread(target=_stream, args=(stack, 4000, results))
    runner.start()
    try:
        # Wait until the long request holds the only slot.
        until(lambda: stack.engine_stats.generated_tokens > 0, "the long request decodes")
        reply = httpx.post(
            f"{stack.base_url}/v1/responses",
            json={"model": random_model.name, "input": "x", "max_output_tokens": 4},
            timeout=30,
        )
        assert reply.status_code == 503
        error = reply.json()["error"]
        assert error["type"] == "server_error" and error["code"] == "server_overloaded"
        streamed = httpx.post(
            f"{stack.base_url}/v1/responses",
            json={"model": random_model.name, "input": "x", "stream": True},
            timeout=30,
        )
        assert streamed.status_code == 503
    finally:
        assert stack.core is not None
        for response_id in list(stack.core.pipeline.in_flight):
            httpx.post(f"{stack.base_url}/v1/responses/{response_id}/cancel", timeout=30)
        runner.join(60)


def _turns(stack: Stack) -> tuple[dict[str, Any], dict[str, Any]]:
    url = f"{stack.base_url}/v1/responses"
    model = stack.settings.models[0].name
    first = httpx.post(
        url, json={"model": model, "input": "history " * 200, "max_output_tokens": 4}, timeout=60
    ).json()
    second = httpx.post(
        url,
        json={
            "model": model,
            "input": "next",
            "previous_response_id": first["id"],
            "max_output_tokens": 4,
        },
        timeout=60,
    ).json()
    return first, second


def test_prompt_cache_reuses_the_previous_turn(random_stack: Stack) -> None:
    first, second = _turns(random_stack)
    # The first turn can share at most a template prefix with earlier requests.
    assert first["usage"]["input_tokens_details"]["cached_tokens"] < 20
    cached = second["usage"]["input_tokens_details"]["cached_tokens"]
    assert cached >= first["usage"]["input_tokens"] - 2
    assert cached < second["usage"]["input_tokens"]


def test_prompt_cache_can_be_disabled(make_stack: Any, random_model: Path) -> None:
    stack = make_stack(model=random_model, prompt_cache_max_entries=0)
    _, second = _turns(stack)
    assert second["usage"]["input_tokens_details"]["cached_tokens"] == 0


def test_conversations_under_one_long_system_turn_share_its_cache(stack: Stack) -> None:
    """The bundled model attends over a 2,048-token window: a cached turn past it cannot be cut
    back to where a new conversation parts from it. Under the same instructions and tools
    (longer than the window), the second conversation is served from the entry the first left
    where its system turn ended."""
    story = (
        "The harbour town woke early: fishermen mended nets, the baker lit his ovens, and the "
        "children ran down to the pier to count the boats coming home with the morning tide. "
    )
    tool = {
        "type": "function",
        "name": "count_boats",
        "parameters": {"type": "object", "properties": {"pier": {"type": "string"}}},
    }
    body = {
        "model": stack.settings.models[0].name,
        "instructions": f"Session {uuid.uuid4().hex}. " + story * 60,
        "tools": [tool],
        "max_output_tokens": 4,
    }
    usages = [
        httpx.post(
            f"{stack.base_url}/v1/responses", json={**body, "input": words}, timeout=120
        ).json()["usage"]
        for words in ("Where is the village?", "Tell me of the storms and the ships.")
    ]
    assert usages[0]["input_tokens"] > 2 * 2048
    cached = usages[1]["input_tokens_details"]["cached_tokens"]
    assert 2048 < cached < usages[1]["input_tokens"] - 5, usages


def test_a_restarted_server_reads_a_long_prompt_from_disk(tmp_path: Path) -> None:
    """The prompt cache's disk tier through the server: a core stopped (its writes finished)
    and started again over the same folder serves a long prompt from disk."""
    request = {"input": "The harbour town woke early. " * 120, "max_output_tokens": 4}
    usage = []
    for _ in range(2):
        with Stack.running(model_path=BUNDLED_MODEL, prompt_cache_dir=tmp_path) as stack:
            body = httpx.post(
                f"{stack.base_url}/v1/responses",
                json={"model": BUNDLED_MODEL.name, **request},
                timeout=60,
            ).json()
            usage.append(body["usage"])
    assert usage[0]["input_tokens"] > 600
    assert usage[0]["input_tokens_details"]["cached_tokens"] == 0
    assert usage[1]["input_tokens_details"]["cached_tokens"] >= 0.9 * usage[1]["input_tokens"]
    assert list((tmp_path / "entries").iterdir())


@pytest.mark.parametrize("retention", ["in_memory", "24h"])
def test_the_retention_reaches_the_disk_tier(
    random_model: Path, tmp_path: Path, retention: str
) -> None:
    """`prompt_cache_retention` through the server: `in_memory` keeps a long prompt's entries
    off the disk (a restart reads nothing), `24h` writes them with a day's lifetime (a restart
    reads the prompt from disk)."""
    request = {
        "model": random_model.name,
        "input": "The harbour town woke early. " * 120,
        "max_output_tokens": 2,
        "temperature": 0,
        "prompt_cache_retention": retention,
    }
    usage = []
    for _ in range(2):
        with Stack.running(model_path=random_model, prompt_cache_dir=tmp_path) as stack:
            reply = httpx.post(f"{stack.base_url}/v1/responses", json=request, timeout=60)
            assert reply.status_code == 200, reply.text
            usage.append(reply.json()["usage"])
    read = usage[1]["input_tokens_details"]["cached_tokens"]
    with closing(sqlite3.connect(tmp_path / "index.sqlite")) as db:
        ttls = [row[0] for row in db.execute("SELECT ttl FROM entries")]
    if retention == "in_memory":
        assert read == 0 and ttls == []
        assert not list((tmp_path / "entries").iterdir())
    else:
        assert read >= 0.9 * usage[1]["input_tokens"]
        assert ttls and set(ttls) == {86400}


def test_a_model_warms_up_before_it_serves(
    random_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The pool warms a model up as it loads (a tool-constrained and a free generation,
    service/engine/warm_up.py), and the warm-up leaves nothing a request sees: the first one
    reads nothing from the prompt cache and is the engine's first completion."""
    caplog.set_level(logging.INFO, logger="mlx_responses.service.models.pool")
    with Stack.running(model_path=random_model) as stack:
        loads = [r.getMessage() for r in caplog.records if "warming up" in r.getMessage()]
        assert len(loads) == 1
        seconds = float(loads[0].split(", ")[1].split("s of it warming up")[0])
        assert seconds > 0
        assert stack.engine_stats.completed == 0 and stack.engine_stats.solo_sequences == 0
        body = {"model": random_model.name, "input": "hello there", "max_output_tokens": 2}
        reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)
        assert reply.json()["usage"]["input_tokens_details"]["cached_tokens"] == 0
        assert stack.engine_stats.completed == 1
