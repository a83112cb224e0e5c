"""Several --model on one core: selection by name, lazy loads, LRU unloads under a limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.http.test_metrics import scrape, value
from tests.support.random_model import build_random_model
from tests.support.stack import Stack

StackFactory = Callable[..., Stack]


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A 64 MB random model: big enough that its weights show in MLX's memory."""
    return build_random_model(
        tmp_path_factory.mktemp("big") / "big-chat",
        hidden_size=512,
        layers=4,
        intermediate_size=2048,
        heads=8,
        kv_heads=4,
        seed=5,
        tokenizer_from=model_path,
    )


def weight_bytes(folder: Path) -> int:
    return (folder / "model.safetensors").stat().st_size


def post(stack: Stack, path: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{stack.base_url}{path}", json=body, timeout=120)


def create(stack: Stack, model: str, **fields: Any) -> dict[str, Any]:
    body = {"model": model, "input": "Reply with: hello", "max_output_tokens": 8, **fields}
    reply = post(stack, "/v1/responses", **body)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def loaded(stack: Stack) -> dict[str, bool]:
    """Which models are in memory, as /metrics shows it."""
    samples = scrape(f"{stack.base_url}/metrics")
    return {
        dict(labels)["model_name"]: v == 1
        for (name, labels), v in samples.items()
        if name == "mlx_responses_model_loaded"
    }


def metric(stack: Stack, name: str, **labels: str) -> float:
    return value(scrape(f"{stack.base_url}/metrics"), name, **labels)


def test_two_models_each_served_under_its_name(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    stack = make_stack(models=(model_path, random_model))
    tiny, rand = model_path.name, random_model.name
    listed = httpx.get(f"{stack.base_url}/v1/models", timeout=10).json()
    assert [m["id"] for m in listed["data"]] == [tiny, rand]
    assert all(m["object"] == "model" for m in listed["data"])
    assert loaded(stack) == {tiny: True, rand: False}
    assert create(stack, rand)["model"] == rand
    assert create(stack, tiny)["model"] == tiny
    # The folder path names a model too; the engines are the models' own.
    assert create(stack, str(random_model))["model"] == rand
    assert stack.core is not None
    pool = stack.core.models.models
    assert pool[rand].runtime is not None and pool[tiny].runtime is not None
    assert pool[rand].runtime.worker is not pool[tiny].runtime.worker
    assert pool[rand].runtime.worker.stats.completed == 2
    assert pool[tiny].runtime.worker.stats.completed == 1
    one = httpx.get(f"{stack.base_url}/v1/models/{rand}", timeout=10)
    assert one.status_code == 200 and one.json()["id"] == rand
    assert one.json()["context_length"] == 4096
    for url in (f"{stack.base_url}/v1/models/gpt-imaginary", f"{stack.base_url}/models/nope"):
        missing = httpx.get(url, timeout=10)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "model_not_found"
    unknown = post(stack, "/v1/responses", model="gpt-imaginary", input="hi")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert unknown.json()["error"]["param"] == "model"
    # An unknown model loads nothing.
    assert not [k for k in scrape(f"{stack.base_url}/metrics") if "gpt-imaginary" in str(k)]


def test_a_lazy_model_loads_once_for_concurrent_first_requests(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    stack = make_stack(models=(model_path, random_model))
    rand = random_model.name
    assert loaded(stack)[rand] is False
    assert metric(stack, "mlx_responses_model_loads_total", model_name=rand, reason="request") == 0
    with ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda _: create(stack, rand), range(6)))
    assert {r["model"] for r in replies} == {rand}
    assert metric(stack, "mlx_responses_model_loads_total", model_name=rand, reason="request") == 1
    assert loaded(stack)[rand] is True


def test_lru_unload_under_max_loaded_models_frees_the_memory(
    make_stack: StackFactory, model_path: Path, random_model: Path, big_model: Path
) -> None:
    stack = make_stack(models=(model_path, big_model, random_model), max_loaded_models=2)
    tiny, big, rand = model_path.name, big_model.name, random_model.name
    size = weight_bytes(big_model)
    active = "mlx_responses_mlx_active_memory_bytes"
    before = metric(stack, active)
    assert loaded(stack) == {tiny: True, big: False, rand: False}
    assert create(stack, big)["model"] == big
    assert loaded(stack) == {tiny: True, big: True, rand: False}
    with_big = metric(stack, active)
    assert with_big - before >= 0.9 * size
    assert [t for t in threading.enumerate() if t.name == f"mlx-engine-{big}"]
    create(stack, tiny)  # `big` is now the least recently used
    assert create(stack, rand)["model"] == rand
    assert loaded(stack) == {tiny: True, big: False, rand: True}
    assert with_big - metric(stack, active) >= 0.9 * size
    assert metric(stack, "mlx_responses_model_unloads_total", model_name=big, reason="lru") == 1
    assert metric(stack, "mlx_responses_model_unloads_total", model_name=tiny, reason="lru") == 0
    # Its engine thread ended (a parked one would keep the weights alive).
    assert not [t for t in threading.enumerate() if t.name == f"mlx-engine-{big}"]
    # An unloaded model loads again on demand; `tiny` is the least recently used now.
    assert create(stack, big)["model"] == big
    assert loaded(stack) == {tiny: False, big: True, rand: True}
    assert metric(stack, "mlx_responses_model_loads_total", model_name=big, reason="request") == 2


def wait_for(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


def test_a_busy_model_is_not_unloaded_the_load_waits(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    stack = make_stack(models=(random_model, model_path), max_loaded_models=1)
    rand, tiny = random_model.name, model_path.name
    # A long background job on `rand`: greedy random weights loop on one word to
    # max_output_tokens (sampled, they could end it at any step with an end-of-turn token).
    job = create(stack, rand, background=True, max_output_tokens=3000, input="go", temperature=0)
    url = f"{stack.base_url}/v1/responses/{job['id']}"
    wait_for(lambda: httpx.get(url, timeout=10).json()["status"] == "in_progress")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(create, stack, tiny)
        assert stack.core is not None
        wait_for(lambda: stack.core is not None and stack.core.models.models[rand].draining)
        # The job runs on; nothing unloaded its model, the other load waits.
        assert httpx.get(url, timeout=10).json()["status"] == "in_progress"
        assert not waiting.done()
        assert loaded(stack) == {rand: True, tiny: False}
        cancelled = post(stack, f"/v1/responses/{job['id']}/cancel")
        assert cancelled.json()["status"] == "cancelled"
        assert waiting.result(120)["model"] == tiny
    assert loaded(stack) == {rand: False, tiny: True}
    assert httpx.get(url, timeout=10).json()["status"] == "cancelled"


def test_history_jobs_tokens_and_compaction_route_to_the_named_model(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    stack = make_stack(models=(model_path, random_model))
    tiny, rand = model_path.name, random_model.name
    first = create(stack, tiny, input="Reply with: one")
    # A chain may switch models: the history is items, rendered by the next model.
    second = create(stack, rand, previous_response_id=first["id"], input="and two")
    assert second["model"] == rand and second["previous_response_id"] == first["id"]
    third = create(stack, tiny, previous_response_id=second["id"], input="three")
    assert third["model"] == tiny
    stored = httpx.get(f"{stack.base_url}/v1/responses/{second['id']}", timeout=10).json()
    assert stored["model"] == rand
    for model in (tiny, rand):
        turn = create(stack, model, conversation="conv_two_models", input=f"on {model}")
        assert turn["model"] == model
    transcript = stack.run(stack.core.conversations.items("conv_two_models"))  # type: ignore[union-attr]
    assert len([i for i in transcript if i.HasField("message")]) >= 4
    job = create(stack, rand, background=True, input="go", temperature=0)
    assert job["model"] == rand
    url = f"{stack.base_url}/v1/responses/{job['id']}"
    # Greedy random weights loop to max_output_tokens: incomplete.
    wait_for(lambda: httpx.get(url, timeout=10).json()["status"] == "incomplete")
    assert httpx.get(url, timeout=10).json()["model"] == rand
    body = {"input": "Reply with: hello"}
    counted = {
        m: post(stack, "/v1/responses/input_tokens", model=m, **body).json()["input_tokens"]
        for m in (tiny, rand)
    }
    assert counted[tiny] == counted[rand] > 0  # one tokenizer, one template
    missing = post(stack, "/v1/responses/input_tokens", model="nope", **body)
    assert missing.status_code == 404
    compacted = post(
        stack,
        "/v1/responses/compact",
        model=rand,
        input=[
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"Reply with: word{i}"}
            for i in range(8)
        ],
        keep_tokens=20,
        max_output_tokens=8,
    )
    assert compacted.status_code == 200, compacted.text
    assert compacted.json()["model"] == rand
    assert stack.core is not None
    assert stack.core.models.models[rand].runtime is not None
    assert stack.core.models.models[rand].runtime.worker.stats.completed >= 3


def test_the_draft_model_drafts_for_the_first_model_only(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    """--draft-model shares the first --model's tokenizer; the others serve without speculation."""
    stack = make_stack(
        models=(random_model, model_path), speculative="draft", draft_model=random_model
    )
    rand, tiny = random_model.name, model_path.name
    assert create(stack, tiny)["model"] == tiny
    greedy = create(stack, rand, temperature=0, max_output_tokens=24)
    assert greedy["status"] in ("completed", "incomplete")
    assert stack.core is not None
    workers = {m.id: m.runtime.worker for m in stack.core.models.models.values() if m.runtime}
    assert (workers[rand].speculative, workers[tiny].speculative) == ("draft", "off")
    assert (workers[rand].load_draft is None, workers[tiny].load_draft is None) == (False, True)
