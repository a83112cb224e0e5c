"""--isolate-keys: each response, job and conversation belongs to the key that made it; another
key gets 404 (memory and Redis stores), and stores hold the key's hash, never the key."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import redis
from mlx_responses.service.config import ConfigError, Settings

from mlx_responses.v1 import storage_service_pb2 as st
from mlx_responses.v1 import storage_service_pb2_grpc as st_grpc
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack

OWNER = "sk-owner-4f1a9c0d7e"
OTHER = "sk-other-b83e51aa20"


def _headers(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _create(stack: Stack, key: str, **fields: Any) -> httpx.Response:
    body = {
        "model": stack.settings.models[0].name,
        "input": "Reply with: hi",
        "max_output_tokens": 4,
        **fields,
    }
    return httpx.post(
        f"{stack.base_url}/v1/responses", json=body, headers=_headers(key), timeout=60
    )


def _conversation(stack: Stack, key: str, conversation_id: str) -> grpc.StatusCode | None:
    with grpc.insecure_channel(stack.grpc_address) as channel:
        stub = st_grpc.StorageServiceStub(channel)
        try:
            stub.GetConversation(
                st.GetConversationRequest(id=conversation_id),
                metadata=[("authorization", f"Bearer {key}")],
            )
        except grpc.RpcError as error:
            return error.code()  # type: ignore[no-any-return]
    return None


def _isolation(stack: Stack) -> None:
    base = stack.base_url
    made = _create(stack, OWNER)
    assert made.status_code == 200, made.text
    rid = made.json()["id"]
    assert httpx.get(f"{base}/v1/responses/{rid}", headers=_headers(OWNER)).status_code == 200
    for method, path in (
        ("GET", f"/v1/responses/{rid}"),
        ("DELETE", f"/v1/responses/{rid}"),
        ("POST", f"/v1/responses/{rid}/cancel"),
    ):
        reply = httpx.request(method, f"{base}{path}", headers=_headers(OTHER), timeout=30)
        assert reply.status_code == 404, (method, path, reply.text)
    chained = _create(stack, OTHER, previous_response_id=rid)
    assert chained.status_code == 404 or chained.json()["error"]["code"] == (
        "previous_response_not_found"
    ), chained.text
    assert _create(stack, OWNER, previous_response_id=rid).status_code == 200
    # A background job: its poll view is its owner's alone.
    job = _create(stack, OWNER, background=True).json()
    assert httpx.get(f"{base}/v1/responses/{job['id']}", headers=_headers(OTHER)).status_code == 404
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        poll = httpx.get(f"{base}/v1/responses/{job['id']}", headers=_headers(OWNER)).json()
        if poll["status"] not in ("queued", "in_progress"):
            break
        time.sleep(0.05)
    assert poll["status"] == "completed"
    # Conversations: the same id names a different transcript per key.
    assert _create(stack, OWNER, conversation="conv_iso").status_code == 200
    assert _conversation(stack, OWNER, "conv_iso") is None
    assert _conversation(stack, OTHER, "conv_iso") == grpc.StatusCode.NOT_FOUND
    count = httpx.post(
        f"{base}/v1/responses/input_tokens",
        json={"model": stack.settings.models[0].name, "input": "x", "conversation": "conv_iso"},
        headers=_headers(OTHER),
    ).json()["input_tokens"]
    alone = httpx.post(
        f"{base}/v1/responses/input_tokens",
        json={"model": stack.settings.models[0].name, "input": "x"},
        headers=_headers(OTHER),
    ).json()["input_tokens"]
    assert count == alone  # nothing of the owner's transcript reaches the other key
    # The conversations API: an object is its owner's, under the id its owner was given.
    made_conv = httpx.post(f"{base}/v1/conversations", json={}, headers=_headers(OWNER)).json()
    cid = made_conv["id"]
    mine = httpx.get(f"{base}/v1/conversations/{cid}", headers=_headers(OWNER))
    assert mine.status_code == 200 and mine.json()["id"] == cid, mine.text
    assert httpx.get(f"{base}/v1/conversations/{cid}", headers=_headers(OTHER)).status_code == 404
    gone = httpx.delete(f"{base}/v1/conversations/{cid}", headers=_headers(OTHER))
    assert gone.status_code == 404
    assert httpx.get(f"{base}/v1/responses/{rid}", headers=_headers(OWNER)).status_code == 200


def test_keys_are_isolated_in_memory(make_stack: Any) -> None:
    _isolation(make_stack(api_keys=(OWNER, OTHER), isolate_keys=True, store_url="memory"))


def test_keys_are_isolated_on_redis_which_holds_no_key(
    make_stack: Any, redis_server: RedisServer
) -> None:
    url = redis_server.url(6)
    redis.Redis.from_url(url).flushdb()
    _isolation(make_stack(api_keys=(OWNER, OTHER), isolate_keys=True, store_url=url))
    client = redis.Redis.from_url(url)
    keys = client.keys("*")
    assert keys
    dump = b"".join(keys)
    for key in keys:
        kind = client.type(key)
        if kind == b"string":
            dump += client.get(key) or b""
        elif kind == b"list":
            dump += b"".join(client.lrange(key, 0, -1))
        elif kind == b"hash":
            dump += b"".join(k + v for k, v in client.hgetall(key).items())
    for plain in (OWNER, OTHER):
        assert plain.encode() not in dump
    assert hashlib.sha256(OWNER.encode()).hexdigest().encode() in dump


def test_without_the_flag_any_key_reads(make_stack: Any) -> None:
    stack: Stack = make_stack(api_keys=(OWNER, OTHER))
    rid = _create(stack, OWNER).json()["id"]
    reply = httpx.get(f"{stack.base_url}/v1/responses/{rid}", headers=_headers(OTHER))
    assert reply.status_code == 200


def test_isolation_needs_keys(model_path: Path) -> None:
    with pytest.raises(ConfigError):
        Settings(models=(model_path,), isolate_keys=True)


def _cached(stack: Stack, key: str, prompt: str) -> int:
    reply = _create(stack, key, input=prompt, max_output_tokens=1)
    assert reply.status_code == 200, reply.text
    return int(reply.json()["usage"]["input_tokens_details"]["cached_tokens"])


def test_the_prompt_cache_is_each_keys_own(make_stack: Any) -> None:
    """Another key's prompt is never a cache hit: `cached_tokens` (and the time to the first
    token) would tell a key, prefix by prefix, what another key has sent."""
    stack: Stack = make_stack(api_keys=(OWNER, OTHER), isolate_keys=True)
    prompt = "The launch code is 4512-7788-9034; keep it to yourself. " * 8
    assert _cached(stack, OWNER, prompt) == 0
    assert _cached(stack, OTHER, prompt) == 0
    assert _cached(stack, OWNER, prompt) > 0  # the owner's own entry still serves it
    assert _cached(stack, OTHER, prompt) > 0  # and the other key's its own


def test_without_the_flag_keys_share_the_prompt_cache(make_stack: Any) -> None:
    stack: Stack = make_stack(api_keys=(OWNER, OTHER))
    prompt = "A prompt any key may share the cache of. " * 8
    assert _cached(stack, OWNER, prompt) == 0
    assert _cached(stack, OTHER, prompt) > 0
