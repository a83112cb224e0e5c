"""Models on demand: keep_alive unloads an idle model (its memory returns, its prompt cache's
disk tier written first, so the next request loads it again and is served from disk), --pin
keeps one, explicit load and unload (HTTP and gRPC), --model-dir, and each refusal.

The model pool holds no response: these run on the session's store alone, once (`make
test-redis` runs them on Redis), not once per store."""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from mlx_responses.service.config import BUNDLED_MODEL, ConfigError
from mlx_responses.service.engine.prompt_cache.disk import PromptDisk
from mlx_responses.service.models.vision_runtime import VisionRuntime

from mlx_responses_client import Client
from tests.http import test_models
from tests.http.test_models import create, metric, post, weight_bytes
from tests.http.test_openapi import conforms, response_schema
from tests.support.random_vlm import build_random_vlm
from tests.support.stack import Stack

StackFactory = Callable[..., Stack]
big_model = test_models.big_model  # its 64 MB random model: weights that show in MLX's memory
ACTIVE = "mlx_responses_mlx_active_memory_bytes"
LONG_PROMPT = "The harbour town woke early. " * 120  # long enough for the disk tier


def models(stack: Stack) -> dict[str, dict[str, Any]]:
    listed = httpx.get(f"{stack.base_url}/v1/models", timeout=10)
    assert listed.status_code == 200, listed.text
    return {m["id"]: m for m in listed.json()["data"]}


def wait_for(check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


def unloads(stack: Stack, model: str, reason: str) -> float:
    return metric(stack, "mlx_responses_model_unloads_total", model_name=model, reason=reason)


def loads(stack: Stack, model: str, reason: str) -> float:
    return metric(stack, "mlx_responses_model_loads_total", model_name=model, reason=reason)


def unload_at_the_end(stack: Stack, model: str) -> None:
    """A stopping stack parks its engine threads: test_models counts big-chat's by name."""
    assert post(stack, f"/v1/models/{model}/unload").status_code == 200


def test_idle_past_keep_alive_unloads_and_the_memory_returns(
    make_stack: StackFactory, model_path: Path, big_model: Path
) -> None:
    stack = make_stack(models=(model_path, big_model))
    big = big_model.name
    before = metric(stack, ACTIVE)
    started = time.time()
    # Loaded for an hour: what /v1/models lists is read before any expiry, however slow the
    # machine (a keep_alive of 1 s here had expired before the listing under two CPU burners).
    first = create(stack, big, keep_alive="1h", store=True)
    listed = models(stack)[big]
    assert (listed["loaded"], listed["pinned"]) == (True, False)
    # What /v1/models says the weights take is what they take (the file holds a header too).
    assert 0.99 * weight_bytes(big_model) <= listed["memory_bytes"] <= weight_bytes(big_model)
    # expires_at is whole seconds (Unix time, rounded down).
    assert int(started) + 3600 <= listed["expires_at"] <= time.time() + 3600
    assert metric(stack, ACTIVE) - before >= 0.9 * listed["memory_bytes"]
    assert models(stack)[model_path.name]["expires_at"] is None  # keep_alive -1 (the stack's)
    # The latest request's keep_alive is the model's: idle 1 s past this one, it unloads.
    create(stack, big, keep_alive=1)
    wait_for(lambda: unloads(stack, big, "keep_alive") == 1)
    gone = models(stack)[big]
    assert (gone["loaded"], gone["memory_bytes"], gone["expires_at"]) == (False, 0, None)
    assert metric(stack, ACTIVE) - before < 0.1 * listed["memory_bytes"]
    # The next requests (two at once) load it once again; the chain's history is in the store.
    with ThreadPoolExecutor(2) as pool:
        replies = list(
            pool.map(lambda _: create(stack, big, previous_response_id=first["id"]), range(2))
        )
    assert {r["model"] for r in replies} == {big}
    assert loads(stack, big, "request") == 2
    assert models(stack)[big]["loaded"] is True
    assert metric(stack, "mlx_responses_model_load_seconds_count", model_name=big) == 2
    unload_at_the_end(stack, big)


def test_the_reload_is_served_from_the_disk_tier(
    make_stack: StackFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keep_alive 0 unloads right after the request, the disk tier's write finished first."""
    write = PromptDisk._write

    def slow_write(disk: PromptDisk, db: sqlite3.Connection, job: Any) -> None:
        time.sleep(1)  # a write still under way when the model goes idle
        write(disk, db, job)

    monkeypatch.setattr(PromptDisk, "_write", slow_write)
    stack = make_stack(model=BUNDLED_MODEL, prompt_cache_dir=tmp_path)
    name = BUNDLED_MODEL.name
    body = {"input": LONG_PROMPT, "max_output_tokens": 4, "keep_alive": 0}
    first = create(stack, name, **body)
    wait_for(lambda: unloads(stack, name, "keep_alive") == 1)
    # Unloaded means written: the entry is in the disk tier's index already.
    with sqlite3.connect(tmp_path / "index.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] >= 1
    assert models(stack)[name]["loaded"] is False
    again = create(stack, name, **{**body, "keep_alive": "-1"})
    assert first["usage"]["input_tokens_details"]["cached_tokens"] == 0
    usage = again["usage"]
    assert usage["input_tokens_details"]["cached_tokens"] >= 0.9 * usage["input_tokens"]
    assert loads(stack, name, "request") == 1 and loads(stack, name, "startup") == 1
    assert models(stack)[name]["loaded"] is True  # "-1": for good


def test_each_generation_surface_takes_keep_alive(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    stack = make_stack(models=(model_path, random_model))
    rand = random_model.name
    calls: list[tuple[str, dict[str, Any]]] = [
        ("/v1/responses", {"input": "hi", "max_output_tokens": 2}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
        ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    ]
    for number, (path, body) in enumerate(calls, 1):
        reply = post(stack, path, model=rand, keep_alive="0s", max_completion_tokens=2, **body)
        assert reply.status_code == 200, (path, reply.text)
        wait_for(lambda n=number: unloads(stack, rand, "keep_alive") == n)  # type: ignore[misc]
    assert loads(stack, rand, "request") == 4


@pytest.mark.parametrize("keep_alive", ["soon", "5 m", "1d", True, [], {"s": 1}, ""])
def test_an_invalid_keep_alive_is_a_400_naming_it(
    stack: Stack, keep_alive: Any, model_path: Path
) -> None:
    model = model_path.name
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("/v1/responses", {"input": "hi"}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/completions", {"prompt": "hi"}),
        ("/v1/responses/input_tokens", {"input": "hi"}),
        (f"/v1/models/{model}/load", {}),
    ]
    for path, body in bodies:
        reply = post(stack, path, model=model, keep_alive=keep_alive, **body)
        assert reply.status_code == 400, (path, reply.text)
        error = reply.json()["error"]
        assert (error["type"], error["param"]) == ("invalid_request_error", "keep_alive"), path
    anthropic = post(
        stack,
        "/v1/messages",
        model=model,
        max_tokens=2,
        messages=[{"role": "user", "content": "hi"}],
        keep_alive=keep_alive,
    )
    assert anthropic.status_code == 400
    assert anthropic.json()["error"]["type"] == "invalid_request_error"
    assert "keep_alive" in anthropic.json()["error"]["message"]


def test_pinned_and_kept_models_stay(
    make_stack: StackFactory, model_path: Path, random_model: Path, big_model: Path
) -> None:
    """--pin loads at startup and outlives keep-alive and the LRU; keep_alive -1 outlives the
    server's short --keep-alive."""
    stack = make_stack(
        models=(model_path, random_model, big_model),
        pins=(str(random_model),),  # a pin may name the folder path
        keep_alive=0.2,
        max_loaded_models=2,
    )
    tiny, rand, big = model_path.name, random_model.name, big_model.name
    listed = models(stack)
    assert (listed[rand]["loaded"], listed[rand]["pinned"]) == (True, True)
    assert listed[rand]["expires_at"] is None and listed[rand]["memory_bytes"] > 0
    assert loads(stack, rand, "startup") == 1
    create(stack, rand, keep_alive=0)
    create(stack, tiny, keep_alive=-1)
    time.sleep(0.6)
    listed = models(stack)
    assert listed[rand]["loaded"] and listed[tiny]["loaded"]
    assert listed[tiny]["expires_at"] is None
    # Another model needs room (limit 2): the unpinned one goes, the pinned one stays.
    create(stack, big, keep_alive="1h")
    listed = models(stack)
    assert (listed[rand]["loaded"], listed[tiny]["loaded"], listed[big]["loaded"]) == (
        True,
        False,
        True,
    )
    assert unloads(stack, tiny, "lru") == 1 and unloads(stack, rand, "lru") == 0
    assert listed[big]["expires_at"] >= time.time() + 3000  # "1h"
    unload_at_the_end(stack, big)


def test_explicit_load_and_unload(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    stack = make_stack(models=(model_path, random_model))
    rand = random_model.name
    loaded = post(stack, f"/v1/models/{rand}/load", keep_alive="30m")
    assert loaded.status_code == 200, loaded.text
    body = loaded.json()
    assert (body["id"], body["object"], body["loaded"]) == (rand, "model", True)
    assert body["memory_bytes"] > 0 and body["expires_at"] >= time.time() + 1700
    assert loads(stack, rand, "explicit") == 1
    # Loading a loaded model is a no-op (it restarts the keep-alive); no body is fine.
    again = httpx.post(f"{stack.base_url}/models/{rand}/load", timeout=30)
    assert again.status_code == 200 and again.json()["expires_at"] is None  # the stack's -1
    assert loads(stack, rand, "explicit") == 1
    # Busy: a background job holds it; unloading it is a 409 until the job ends.
    job = create(stack, rand, background=True, max_output_tokens=3000, input="go", temperature=0)
    url = f"{stack.base_url}/v1/responses/{job['id']}"
    wait_for(lambda: httpx.get(url, timeout=10).json()["status"] == "in_progress")
    busy = post(stack, f"/v1/models/{rand}/unload")
    assert busy.status_code == 409, busy.text
    error = busy.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "model_busy",
        "model",
    )
    document = httpx.get(f"{stack.base_url}/openapi.json", timeout=10).json()
    assert conforms(document, "Model", body) == []  # answers as the document says
    assert conforms(document, "Error", busy.json()) == []
    assert response_schema(document, "/v1/models/{model}/unload", "post", 409) == "Error"
    assert post(stack, f"/v1/responses/{job['id']}/cancel").json()["status"] == "cancelled"
    wait_for(lambda: post(stack, f"/v1/models/{rand}/unload").status_code == 200)
    assert models(stack)[rand]["loaded"] is False
    assert unloads(stack, rand, "explicit") == 1
    # Unloading an unloaded model is a no-op; the next request loads it again.
    assert post(stack, f"/v1/models/{rand}/unload").json()["loaded"] is False
    assert unloads(stack, rand, "explicit") == 1
    assert create(stack, rand)["model"] == rand
    for path in ("/v1/models/gpt-imaginary/load", "/models/gpt-imaginary/unload"):
        missing = post(stack, path)
        assert missing.status_code == 404, missing.text
        assert missing.json()["error"]["code"] == "model_not_found"
    # The routes are POST only (a GET there is not a lookup of a model named ".../load").
    for action in ("load", "unload"):
        get = httpx.get(f"{stack.base_url}/v1/models/{rand}/{action}", timeout=10)
        assert get.status_code == 405 and get.headers["Allow"] == "POST", get.headers
    bad = httpx.post(
        f"{stack.base_url}/v1/models/{rand}/load", content=b"[1]", timeout=10
    )  # not an object
    assert bad.status_code == 400


def test_load_and_unload_need_the_api_key(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    stack = make_stack(models=(model_path, random_model), api_keys=("sk-life",))
    rand = random_model.name
    for action in ("load", "unload"):
        refused = httpx.post(f"{stack.base_url}/v1/models/{rand}/{action}", timeout=10)
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] in ("missing_api_key", "invalid_api_key")
    assert not stack.core.models.models[rand].runtime  # type: ignore[union-attr]
    headers = {"Authorization": "Bearer sk-life"}
    for action, loaded in (("load", True), ("unload", False)):
        ok = httpx.post(f"{stack.base_url}/v1/models/{rand}/{action}", headers=headers, timeout=30)
        assert ok.status_code == 200 and ok.json()["loaded"] is loaded


def test_grpc_load_and_unload_discoverable_through_reflection(
    make_stack: StackFactory, model_path: Path, random_model: Path
) -> None:
    stack = make_stack(models=(model_path, random_model))
    rand = random_model.name
    with grpc.insecure_channel(stack.grpc_address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        symbol = "mlx_responses.v1.GenerationService"
        request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol)
        reply = next(stub.ServerReflectionInfo(iter([request])))
        files = [
            descriptor_pb2.FileDescriptorProto.FromString(raw)
            for raw in reply.file_descriptor_response.file_descriptor_proto
        ]
        methods = {
            m.name
            for f in files
            for s in f.service
            if s.name == "GenerationService"
            for m in s.method
        }
        assert {"LoadModel", "UnloadModel", "ListModels"} <= methods
    with Client.connect(stack.grpc_address) as client:
        model = client.load_model(rand, keep_alive_seconds=600)
        assert model.loaded and model.memory_bytes > 0 and model.HasField("expires_at")
        assert [m.loaded for m in client.list_models()] == [True, True]
        assert not client.unload_model(rand).loaded
        with pytest.raises(grpc.RpcError) as missing:
            client.unload_model("gpt-imaginary")
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as nan:
            client.load_model(rand, keep_alive_seconds=float("nan"))
        assert nan.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_model_dir_serves_every_folder_and_finds_new_ones(
    make_stack: StackFactory, model_path: Path, random_model: Path, tmp_path: Path
) -> None:
    shelf = tmp_path / "models"
    shelf.mkdir()
    (shelf / "alpha").symlink_to(random_model)
    (shelf / "notes.txt").write_text("not a model")
    (shelf / "empty").mkdir()  # no config.json: not a model
    stack = make_stack(models=(model_path,), model_dirs=(shelf,))
    listed = models(stack)
    assert list(listed) == [model_path.name, "alpha"]
    assert listed["alpha"]["loaded"] is False
    assert create(stack, "alpha")["model"] == "alpha"
    # A folder added later: a request naming it finds it, and so does the listing.
    shutil.copytree(random_model, shelf / "beta")  # a link to alpha's folder would be alpha
    assert create(stack, "beta")["model"] == "beta"
    shutil.copytree(random_model, shelf / "gamma")
    assert "gamma" in models(stack)
    # A folder removed goes from the listing once it is not loaded.
    shutil.rmtree(shelf / "gamma")
    assert "gamma" not in models(stack)
    assert post(stack, "/v1/responses", model="gamma", input="hi").status_code == 404


def test_model_dir_alone_loads_nothing_at_startup(
    make_stack: StackFactory, random_model: Path, tmp_path: Path
) -> None:
    shelf = tmp_path / "models"
    shelf.mkdir()
    (shelf / "only").symlink_to(random_model)
    stack = make_stack(models=(), model_dirs=(shelf,))
    assert models(stack)["only"]["loaded"] is False
    assert create(stack, "only", keep_alive="250ms")["model"] == "only"
    wait_for(lambda: unloads(stack, "only", "keep_alive") == 1)


def test_lifecycle_settings_refused(
    make_stack: StackFactory, model_path: Path, random_model: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="more --pin models"):
        Stack(model_path, models=(model_path, random_model), pins=("a", "b"), max_loaded_models=1)
    with pytest.raises(ConfigError, match="--model or --model-dir"):
        Stack(model_path, models=())
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"pins": ("nope",)}, "--pin nope"),
        ({"model_dirs": (tmp_path / "missing",)}, "--model-dir .*missing: no such folder"),
        (
            {"pins": (model_path.name,), "max_loaded_models": 1},
            "leaves no room for the others",
        ),
    ]
    clash = tmp_path / "clash"
    shutil.copytree(random_model, clash / model_path.name)  # another folder of the same name
    refusals.append(({"model_dirs": (clash,)}, f"is named '{model_path.name}'"))
    for overrides, message in refusals:
        stack = Stack(model_path, models=(model_path, random_model), **overrides)
        with pytest.raises(ConfigError, match=message):
            stack.start()
        stack.stop()


def test_model_dir_serves_a_vision_model_as_model_does(
    make_stack: StackFactory, model_path: Path, tmp_path: Path
) -> None:
    shelf = tmp_path / "models"
    build_random_vlm(shelf / "eyes")
    stack = make_stack(models=(model_path,), model_dirs=(shelf,))
    assert create(stack, "eyes", max_output_tokens=2)["model"] == "eyes"
    assert stack.core is not None
    assert isinstance(stack.core.models.models["eyes"].runtime, VisionRuntime)
    assert models(stack)["eyes"]["memory_bytes"] > 0
    unload_at_the_end(stack, "eyes")
