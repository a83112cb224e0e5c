"""`--memory-limit` over HTTP, on the memory and Redis stores: a request that can never fit is a
400 naming its size and the budget (streamed and background creates too: refused at create), a
request that does not fit now waits and is served, a full queue is a 503 with Retry-After, and
the metrics show the memory by kind, the wait and the refusals."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.stack import Stack

TOKENS = 600  # long enough that the third request comes while the first runs


@pytest.fixture(scope="module", params=["memory", "redis"])
def budget_stack(request: pytest.FixtureRequest, random_model: Path) -> Iterator[Stack]:
    """The random model with a memory budget, two sequences a batch and no queue beyond."""
    url = "memory"
    if request.param == "redis":
        url = request.getfixturevalue("redis_server").url(5)
    with Stack.running(
        random_model,
        store_url=url,
        memory_limit=float(1 << 40),  # set to what the tests need below
        max_batch_size=2,
        max_queued_requests=0,
        prompt_cache_max_entries=0,
    ) as stack:
        yield stack


def _fit(stack: Stack, tokens: int) -> None:
    """Sets the budget to the weights and one reservation of `tokens` tokens (and less than
    another); the runtime is left out, so the sums are exact."""
    assert stack.core is not None and stack.core.models.memory is not None
    budget = stack.core.models.memory
    runtime = stack.core.models.default.runtime
    assert runtime is not None
    account = runtime.worker.kv.account
    assert account is not None
    one = account.bytes_of([tokens])
    more = account.bytes_of([tokens] * 2) - one
    budget.runtime = 0
    budget.limit = account.weights + one + more // 2


def _post(stack: Stack, path: str, **fields: Any) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, **fields}
    return httpx.post(f"{stack.base_url}{path}", json=body, timeout=120)


def _metric(stack: Stack, name: str) -> float:
    text = httpx.get(f"{stack.base_url}/metrics", timeout=30).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def test_a_request_that_can_never_fit_is_a_400_naming_its_size(budget_stack: Stack) -> None:
    _fit(budget_stack, 512)
    refused_before = _metric(budget_stack, 'mlx_responses_requests_refused_total{model_name="')
    for mode in ({}, {"stream": True}, {"background": True}):
        reply = _post(budget_stack, "/v1/responses", input="hi", max_output_tokens=2000, **mode)
        assert reply.status_code == 400, (mode, reply.text)  # refused at create: no job
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["code"] == "memory_limit_exceeded" and error["param"] == "max_output_tokens"
        assert " of KV cache (" in error["message"] and "--memory-limit" in error["message"]
    chat = _post(
        budget_stack,
        "/v1/chat/completions",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=2000,
    )
    assert chat.status_code == 400 and chat.json()["error"]["code"] == "memory_limit_exceeded"
    # One that fits is served.
    assert _post(budget_stack, "/v1/responses", input="hi", max_output_tokens=8).status_code == 200
    refused = _metric(budget_stack, 'mlx_responses_requests_refused_total{model_name="')
    assert refused - refused_before == 4


def test_a_request_waits_for_memory_then_is_served_and_a_full_queue_is_a_503(
    budget_stack: Stack,
) -> None:
    _fit(budget_stack, 64 + TOKENS)
    waits_before = _metric(budget_stack, "mlx_responses_admission_waits_total")
    replies: dict[str, httpx.Response] = {}

    def ask(name: str) -> None:
        replies[name] = _post(budget_stack, "/v1/responses", input="go", max_output_tokens=TOKENS)

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    stats = budget_stack.engine_stats
    deadline = time.monotonic() + 30
    while stats.running == 0:  # the first is decoding
        assert time.monotonic() < deadline
        time.sleep(0.01)
    second = threading.Thread(target=ask, args=("second",))
    second.start()
    deadline = time.monotonic() + 30
    while budget_stack.core.models.default.runtime.worker.in_flight < 2:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # Two in flight (one running, one waiting for memory) fill the queue: a third is a 503.
    third = _post(budget_stack, "/v1/responses", input="go", max_output_tokens=TOKENS)
    first.join(60)
    second.join(60)
    assert third.status_code == 503 and third.headers.get("Retry-After") == "1", third.text
    assert third.json()["error"]["code"] == "server_overloaded"
    for name in ("first", "second"):  # both served in full: nothing killed or cut short
        body = replies[name].json()
        assert replies[name].status_code == 200, body
        assert body["usage"]["output_tokens"] == TOKENS, name
    assert _metric(budget_stack, "mlx_responses_admission_waits_total") - waits_before == 1
    assert _metric(budget_stack, "mlx_responses_admission_wait_seconds_total") > 0


def test_the_metrics_show_memory_by_kind(budget_stack: Stack) -> None:
    text = httpx.get(f"{budget_stack.base_url}/metrics", timeout=30).text
    name = budget_stack.settings.models[0].name
    for kind in ("weights", "kv", "prompt_cache", "image_cache"):
        assert f'mlx_responses_memory_bytes{{kind="{kind}",model_name="{name}"}}' in text, kind
    assert 'mlx_responses_memory_bytes{kind="runtime",model_name=""}' in text
    assert "mlx_responses_memory_limit_bytes " in text


def test_a_limit_below_the_weights_fails_startup_with_the_figure(random_model: Path) -> None:
    """--memory-limit 1K: the server does not start (it would refuse every request)."""
    from mlx_responses.service.config import ConfigError

    stack = Stack(random_model, memory_limit=1024.0)
    try:
        with pytest.raises(ConfigError, match=r"--memory-limit 0\.0 MiB is too small .* at least"):
            stack.start()
    finally:
        stack.stop()
