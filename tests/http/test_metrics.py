"""GET /metrics: the façade's and the core's Prometheus metrics move with real traffic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.redis_server import RedisServer
from tests.support.stack import Stack
from tests.support.waits import until


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text exposition, by name and labels."""
    reply = httpx.get(url, timeout=10)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    """One sample's value; 0 when the labelled child does not exist yet."""
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def own_stack(random_model: Path) -> Iterator[Stack]:
    """A stack of its own, so counters move only with this module's requests."""
    with Stack.running(model_path=random_model) as s:
        yield s


def test_requests_tokens_and_latency_histograms_move(own_stack: Stack) -> None:
    stack = own_stack
    url = f"{stack.base_url}/metrics"
    model = stack.settings.models[0].name
    m = {"model_name": model}
    before = scrape(url)
    body = {"model": model, "input": "Reply with: hello", "max_output_tokens": 6}
    first = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60).json()
    with httpx.stream(
        "POST", f"{stack.base_url}/v1/responses", json={**body, "stream": True}, timeout=60
    ) as reply:
        assert reply.status_code == 200
        reply.read()
    second = httpx.get(f"{stack.base_url}/v1/responses/{first['id']}", timeout=10)
    assert second.status_code == 200
    assert httpx.get(f"{stack.base_url}/v1/nowhere", timeout=10).status_code == 404
    after = scrape(url)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    route = {"method": "POST", "route": "/v1/responses"}
    assert moved("mlx_responses_http_requests_total", **route, status="200") == 2
    assert (
        moved(
            "mlx_responses_http_requests_total",
            method="GET",
            route="/v1/responses/{response_id}",
            status="200",
        )
        == 1
    )
    assert (
        moved("mlx_responses_http_requests_total", method="GET", route="unmatched", status="404")
        == 1
    )
    assert moved("mlx_responses_http_request_duration_seconds_count", **route) == 2
    # Both requests are identical: the same prompt and max_output_tokens tokens each.
    usage = first["usage"]
    assert usage["output_tokens"] == 6
    assert moved("mlx_responses_prompt_tokens_total", **m) == 2 * usage["input_tokens"]
    assert moved("mlx_responses_generation_tokens_total", **m) == 12
    # The second prompt is served from the first turn's KV cache.
    assert moved("mlx_responses_prompt_tokens_cached_total", **m) > 0
    assert moved("mlx_responses_time_to_first_token_seconds_count", **m) == 2
    assert moved("mlx_responses_time_to_first_token_seconds_sum", **m) > 0
    assert moved("mlx_responses_inter_token_latency_seconds_count", **m) == 10
    assert moved("mlx_responses_e2e_request_latency_seconds_count", **m) == 2
    assert moved("mlx_responses_request_success_total", **m, finished_reason="length") == 2
    assert value(after, "mlx_responses_store_entries", store="responses") >= 2
    assert value(after, "mlx_responses_store_bytes", store="responses") > 0
    assert value(after, "mlx_responses_num_requests_running", **m) == 0

    deleted = httpx.delete(f"{stack.base_url}/v1/responses/{first['id']}", timeout=10)
    assert deleted.status_code == 200
    gone = scrape(url)
    assert (
        value(gone, "mlx_responses_store_entries", store="responses")
        == value(after, "mlx_responses_store_entries", store="responses") - 1
    )


def _wait_for(url: str, predicate: object) -> dict:  # type: ignore[type-arg]
    def reached() -> dict | None:  # type: ignore[type-arg]
        samples = scrape(url)
        return samples if predicate(samples) else None  # type: ignore[operator]

    return until(reached, "the metrics reached the expected state")


def test_running_batch_and_background_gauges(own_stack: Stack) -> None:
    stack = own_stack
    url = f"{stack.base_url}/metrics"
    model = stack.settings.models[0].name
    m = {"model_name": model}
    # greedy: a random model sampling at temperature 1 can draw its end token and finish first
    body = {"model": model, "input": "Count forever", "max_output_tokens": 4000, "temperature": 0}
    with httpx.stream(
        "POST", f"{stack.base_url}/v1/responses", json={**body, "stream": True}, timeout=60
    ) as reply:
        lines = reply.iter_lines()  # kept: a dropped iterator closes the stream
        next(lines)
        busy = _wait_for(url, lambda s: value(s, "mlx_responses_num_requests_running", **m) == 1)
        assert value(busy, "mlx_responses_batch_current_size", **m) == 1
        assert value(busy, "mlx_responses_num_requests_waiting", **m) == 0
        assert (
            value(
                busy,
                "mlx_responses_http_requests_in_progress",
                method="POST",
                route="/v1/responses",
            )
            == 1
        )
    # The client left: the engine drops the sequence.
    _wait_for(url, lambda s: value(s, "mlx_responses_num_requests_running", **m) == 0)

    job = httpx.post(
        f"{stack.base_url}/v1/responses", json={**body, "background": True}, timeout=60
    ).json()
    _wait_for(url, lambda s: value(s, "mlx_responses_background_jobs", state="in_progress") == 1)
    cancelled = httpx.post(f"{stack.base_url}/v1/responses/{job['id']}/cancel", timeout=60)
    assert cancelled.json()["status"] == "cancelled"
    done = _wait_for(
        url, lambda s: value(s, "mlx_responses_background_jobs", state="in_progress") == 0
    )
    assert value(done, "mlx_responses_request_success_total", **m, finished_reason="cancelled") >= 2


def test_scrape_survives_a_shared_store_that_is_down(
    make_stack: Any, redis_server: RedisServer
) -> None:
    stack = make_stack(store_url=redis_server.url(2))
    url = f"{stack.base_url}/metrics"
    model = {"model_name": stack.settings.models[0].name}
    assert ("mlx_responses_store_entries", frozenset({("store", "responses")})) in scrape(url)
    redis_server.stop()
    try:
        down = scrape(url)  # still 200, without the store gauges
        assert ("mlx_responses_store_entries", frozenset({("store", "responses")})) not in down
        assert value(down, "mlx_responses_num_requests_running", **model) == 0
        assert ("mlx_responses_num_requests_running", frozenset(model.items())) in down
    finally:
        redis_server.start()
