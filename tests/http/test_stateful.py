"""Stored responses, previous_response_id, conversations, input_tokens and cancel over HTTP."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import openai
import pytest

from tests.support.stack import Stack


def _create(stack: Stack, **fields: Any) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, "max_output_tokens": 32, **fields}
    return httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)


def _error(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def test_get_and_delete(stack: Stack) -> None:
    created = _create(stack, input="Reply with: hello").json()
    for prefix in ("/v1", ""):
        got = httpx.get(f"{stack.base_url}{prefix}/responses/{created['id']}")
        assert got.status_code == 200
        assert got.json() == created
    deleted = httpx.delete(f"{stack.base_url}/v1/responses/{created['id']}")
    assert deleted.json() == {"id": created["id"], "object": "response", "deleted": True}
    _error(httpx.get(f"{stack.base_url}/v1/responses/{created['id']}"), 404)
    _error(httpx.delete(f"{stack.base_url}/responses/{created['id']}"), 404)


def test_sdk_retrieve_and_delete(stack: Stack) -> None:
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    resp = client.responses.create(model=stack.settings.models[0].name, input="Reply with: one")
    assert client.responses.retrieve(resp.id).output_text == "one"
    client.responses.delete(resp.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(resp.id)


def test_unknown_id_is_404(stack: Stack) -> None:
    error = _error(httpx.get(f"{stack.base_url}/v1/responses/resp_unknown"), 404)
    assert error["type"] == "invalid_request_error"


def test_store_false_is_not_persisted(stack: Stack) -> None:
    created = _create(stack, input="Reply with: two", store=False).json()
    assert created["store"] is False
    _error(httpx.get(f"{stack.base_url}/v1/responses/{created['id']}"), 404)
    error = _error(_create(stack, input="x", previous_response_id=created["id"]), 400)
    assert error["param"] == "previous_response_id"


def test_previous_response_id_chains_history(stack: Stack) -> None:
    first = _create(stack, input="Reply with: paris", instructions="Be brief.").json()
    second = _create(stack, input="Reply with: london", previous_response_id=first["id"]).json()
    assert second["previous_response_id"] == first["id"]
    assert second["output"][0]["content"][0]["text"] == "london"
    assert second["instructions"] is None
    # The history is rendered: the second prompt is longer than the same input alone.
    alone = _create(stack, input="Reply with: london").json()
    assert second["usage"]["input_tokens"] > alone["usage"]["input_tokens"]
    # input_tokens counts exactly what generation rendered, history included.
    count = httpx.post(
        f"{stack.base_url}/v1/responses/input_tokens",
        json={
            "model": stack.settings.models[0].name,
            "input": "Reply with: london",
            "previous_response_id": first["id"],
        },
    ).json()
    assert count == {
        "object": "response.input_tokens",
        "input_tokens": second["usage"]["input_tokens"],
    }


def test_instructions_are_not_carried(stack: Stack) -> None:
    model = stack.settings.models[0].name
    first = _create(stack, input="Reply with: a", instructions="Answer in French. " * 5).json()
    url = f"{stack.base_url}/responses/input_tokens"
    chained = httpx.post(
        url, json={"model": model, "input": "Reply with: b", "previous_response_id": first["id"]}
    ).json()["input_tokens"]
    # The same history replayed by hand, without the first turn's instructions.
    replay = [{"role": "user", "content": "Reply with: a"}, *first["output"]]
    replay.append({"role": "user", "content": "Reply with: b"})
    by_hand = httpx.post(url, json={"model": model, "input": replay}).json()["input_tokens"]
    with_instructions = httpx.post(
        url, json={"model": model, "input": replay, "instructions": first["instructions"]}
    ).json()["input_tokens"]
    assert chained == by_hand < with_instructions


def test_previous_response_refusals(stack: Stack) -> None:
    error = _error(_create(stack, input="x", previous_response_id="resp_nope"), 400)
    assert error["param"] == "previous_response_id"
    assert error["code"] == "previous_response_not_found"
    first = _create(stack, input="Reply with: yes").json()
    error = _error(
        _create(stack, input="x", previous_response_id=first["id"], conversation="conv_1"), 400
    )
    assert error["type"] == "invalid_request_error"


def test_conversation_transcript(stack: Stack) -> None:
    conversation = "conv_test_transcript"
    first = _create(stack, input="Reply with: cat", conversation=conversation).json()
    assert first["conversation"] == {"id": conversation}
    second = _create(stack, input="Reply with: dog", conversation={"id": conversation}).json()
    assert second["output"][0]["content"][0]["text"] == "dog"
    fresh = _create(stack, input="Reply with: dog").json()
    assert second["usage"]["input_tokens"] > fresh["usage"]["input_tokens"]
    count = httpx.post(
        f"{stack.base_url}/v1/responses/input_tokens",
        json={
            "model": stack.settings.models[0].name,
            "input": "Reply with: dog",
            "conversation": conversation,
        },
    ).json()["input_tokens"]
    # Two turns are in the transcript now, so the count exceeds the second turn's prompt.
    assert count > second["usage"]["input_tokens"]


def test_input_tokens_refusals(stack: Stack) -> None:
    url = f"{stack.base_url}/v1/responses/input_tokens"
    assert (
        _error(httpx.post(url, json={"model": "nope", "input": "x"}), 404)["code"]
        == "model_not_found"
    )
    assert _error(httpx.post(url, content=b"{", headers={"content-type": "application/json"}), 400)
    assert (
        httpx.post(
            url.replace("/v1", ""), json={"model": stack.settings.models[0].name, "input": "x"}
        ).status_code
        == 200
    )


def test_reasoning_echo_restores_a_dropped_reasoning_item(stack: Stack) -> None:
    model = stack.settings.models[0].name
    first = _create(stack, input="Think first, then reply with: sunny", store=False).json()
    assert [i["type"] for i in first["output"]] == ["reasoning", "message"]
    message = first["output"][1]
    turn = [{"role": "user", "content": "Think first, then reply with: sunny"}]
    url = f"{stack.base_url}/v1/responses/input_tokens"
    with_reasoning = httpx.post(
        url,
        json={
            "model": model,
            "input": [*turn, *first["output"], {"role": "user", "content": "Reply with: red"}],
        },
    ).json()["input_tokens"]
    without = httpx.post(
        url,
        json={
            "model": model,
            "input": [*turn, message, {"role": "user", "content": "Reply with: red"}],
        },
    ).json()["input_tokens"]
    assert without == with_reasoning


def test_reasoning_echo_can_be_disabled(make_stack: Any) -> None:
    stack = make_stack(reasoning_echo_max_bytes=0)
    model = stack.settings.models[0].name
    first = _create(stack, input="Think first, then reply with: sunny", store=False).json()
    turn = [{"role": "user", "content": "Think first, then reply with: sunny"}]
    url = f"{stack.base_url}/v1/responses/input_tokens"
    with_reasoning = httpx.post(
        url, json={"model": model, "input": [*turn, *first["output"]]}
    ).json()
    without = httpx.post(url, json={"model": model, "input": [*turn, first["output"][1]]}).json()
    assert without["input_tokens"] < with_reasoning["input_tokens"]


# --- store limits ----------------------------------------------------------------------------


def test_disabled_response_store(make_stack: Any) -> None:
    stack = make_stack(responses_store_max_entries=0)
    created = _create(stack, input="Reply with: hello")
    assert created.status_code == 200
    rid = created.json()["id"]
    for reply in (
        httpx.get(f"{stack.base_url}/v1/responses/{rid}"),
        httpx.delete(f"{stack.base_url}/v1/responses/{rid}"),
        httpx.post(f"{stack.base_url}/v1/responses/{rid}/cancel"),
        _create(stack, input="x", previous_response_id=rid),
    ):
        error = _error(reply, 400)
        assert error["type"] == "invalid_request_error"


def test_disabled_conversation_store(make_stack: Any) -> None:
    stack = make_stack(conversation_store_max_entries=0)
    error = _error(_create(stack, input="x", conversation="conv_a"), 400)
    assert error["param"] == "conversation"
    assert _create(stack, input="Reply with: ok").status_code == 200


def test_zero_byte_budget_keeps_routes_enabled(make_stack: Any) -> None:
    stack = make_stack(responses_store_max_bytes=0, conversation_store_max_bytes=0)
    created = _create(stack, input="Reply with: hello").json()
    _error(httpx.get(f"{stack.base_url}/v1/responses/{created['id']}"), 404)
    assert _create(stack, input="Reply with: ok", conversation="conv_z").status_code == 200


def test_entry_limit_evicts_oldest(make_stack: Any) -> None:
    stack = make_stack(responses_store_max_entries=2)
    ids = [_create(stack, input=f"Reply with: {w}").json()["id"] for w in ("one", "two", "three")]
    assert httpx.get(f"{stack.base_url}/v1/responses/{ids[0]}").status_code == 404
    assert all(httpx.get(f"{stack.base_url}/v1/responses/{i}").status_code == 200 for i in ids[1:])


def test_ttl_expiry(make_stack: Any) -> None:
    stack = make_stack(responses_store_ttl_secs=1)
    rid = _create(stack, input="Reply with: hello").json()["id"]
    assert httpx.get(f"{stack.base_url}/v1/responses/{rid}").status_code == 200
    time.sleep(1.2)
    assert httpx.get(f"{stack.base_url}/v1/responses/{rid}").status_code == 404


def test_load_keeps_store_within_byte_budget(make_stack: Any) -> None:
    import grpc

    from mlx_responses.v1 import storage_service_pb2 as st
    from mlx_responses.v1 import storage_service_pb2_grpc as st_grpc

    budget = 20_000
    stack = make_stack(responses_store_max_bytes=budget, conversation_store_max_bytes=budget)
    words = ["hello", "world", "apple", "banana", "paris", "london", "tokyo", "rain"]
    with grpc.insecure_channel(stack.grpc_address) as channel:
        stub = st_grpc.StorageServiceStub(channel)
        for i in range(60):
            reply = _create(
                stack,
                input=f"Reply with: {words[i % len(words)]}",
                instructions="x" * (i * 7),
                conversation=f"conv_{i % 3}",
            )
            assert reply.status_code == 200
            stats = stub.GetStoreStats(st.GetStoreStatsRequest())
            assert 0 < stats.responses.bytes <= budget
            assert stats.conversations.bytes <= budget
        assert stats.responses.evictions > 0
        assert stats.responses.max_bytes == budget


# --- cancel ----------------------------------------------------------------------------------


def test_cancel_in_flight_response(random_stack: Stack) -> None:
    stack = random_stack
    body = {
        "model": stack.settings.models[0].name,
        "input": "go",
        "stream": True,
        "max_output_tokens": 100000,
        "temperature": 0,
    }
    events: list[dict[str, Any]] = []
    created = threading.Event()

    def consume() -> None:
        with httpx.stream("POST", f"{stack.base_url}/v1/responses", json=body, timeout=60) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    created.set()

    reader = threading.Thread(target=consume)
    reader.start()
    assert created.wait(30)
    rid = events[0]["response"]["id"]
    time.sleep(0.2)
    cancelled = httpx.post(f"{stack.base_url}/v1/responses/{rid}/cancel", timeout=30)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    reader.join(30)
    assert not reader.is_alive()
    assert events[-1]["response"]["status"] == "cancelled"
    stored = httpx.get(f"{stack.base_url}/v1/responses/{rid}").json()
    assert stored["status"] == "cancelled"
    again = httpx.post(f"{stack.base_url}/responses/{rid}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


def test_cancel_refusals(stack: Stack) -> None:
    _error(httpx.post(f"{stack.base_url}/v1/responses/resp_nope/cancel"), 404)
    done = _create(stack, input="Reply with: hello").json()
    error = _error(httpx.post(f"{stack.base_url}/v1/responses/{done['id']}/cancel"), 400)
    assert "completed" in error["message"]
